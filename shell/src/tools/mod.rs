//! Built-in tools: read_file, list_dir, glob, grep (read-only); write_file, edit_file, shell
//! (mutating). Paths are confined to the project after resolving symlinks. (Filled in by the
//! tools work.)

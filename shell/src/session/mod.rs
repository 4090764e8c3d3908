//! The session store under `$OPENMAX_HOME`: the project's session index, one append-only record
//! per session, the owner lock, and resume for `--continue`. (Filled in by the session work.)

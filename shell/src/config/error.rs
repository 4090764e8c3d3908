//! A configuration problem, worded for stderr (it names the file, the line, or the variable
//! to set).

/// A configuration problem, worded for stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_shows_its_words_as_they_are() {
        let words = "config.toml line 3: [sandbox] network must be true or false";
        assert_eq!(ConfigError(words.into()).to_string(), words);
    }
}

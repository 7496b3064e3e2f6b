//! `strata key`: spliced partition keys and hash prefixes from the shell.

use std::io::Write;

use clap::{Args, Subcommand};
use strata::keydesign::{SplicePart, hash_prefix, splice};

use super::common::{CliError, CliResult};

/// Arguments of `key`.
#[derive(Args, Debug)]
pub struct KeyArgs {
    /// The helper.
    #[command(subcommand)]
    pub command: KeyCommand,
}

/// Key helpers.
#[derive(Subcommand, Debug)]
pub enum KeyCommand {
    /// Join key parts into one String partition key: integers zero-padded, a connector that
    /// sorts below every character used. `strata key splice --width 6 --connector , 16 a100 66661`
    Splice {
        /// Digits integers are padded to.
        #[arg(long, default_value_t = 6)]
        width: usize,
        /// Connector character (must sort below every character of the values).
        #[arg(long, default_value = ",")]
        connector: String,
        /// Pad the last part too (the worked example leaves it unpadded; padding keeps numeric
        /// order among keys that share every earlier part).
        #[arg(long)]
        pad_last: bool,
        /// The parts, in key order.
        #[arg(required = true, allow_hyphen_values = true)]
        parts: Vec<String>,
    },
    /// Prefix a key with the first N hex characters of its MD5 digest, to spread sequential keys.
    HashPrefix {
        /// Hex characters of the prefix.
        #[arg(long, default_value_t = 4)]
        len: usize,
        /// The key.
        key: String,
    },
}

/// Runs `key`.
pub fn run(a: &KeyArgs, out: &mut dyn Write) -> CliResult {
    match &a.command {
        KeyCommand::Splice { width, connector, pad_last, parts } => {
            let mut chars = connector.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                return Err(CliError::new(format!("--connector {connector:?}: give exactly one character")));
            };
            let parts: Vec<SplicePart> = parts.iter().map(|p| SplicePart::parse(p)).collect();
            let key = splice(&parts, *width, c, *pad_last).map_err(|e| CliError::new(e.to_string()))?;
            writeln!(out, "{key}")?;
        }
        KeyCommand::HashPrefix { len, key } => {
            if *len == 0 || *len > 32 {
                return Err(CliError::new("--len must be 1 to 32 hex characters"));
            }
            writeln!(out, "{}", hash_prefix(key, *len))?;
        }
    }
    Ok(0)
}

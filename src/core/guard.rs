//! `RLOCK.GUARD`'s rules: which inner commands a guard may run, and whether a call
//! runs its command, from what the lock and its fencing counter hold now.

use std::collections::HashMap;

use super::args::printable;
use super::integer::parse_i64;

/// What the server says of a command (`COMMAND INFO`), as far as a guard cares.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandTraits {
    /// As `COMMAND INFO`: `n` exactly n words, `-n` at least n, the name included.
    pub arity: i64,
    pub blocking: bool,
    pub pubsub: bool,
    /// `noscript`: a script may not run it, nor may a module's call.
    pub noscript: bool,
    /// Its subcommands (`CONFIG GET`, ...), by lower-case name.
    pub subcommands: HashMap<Vec<u8>, CommandTraits>,
}

/// The commands a guard has looked up, by lower-case name: `COMMAND INFO` once each.
#[derive(Debug, Default)]
pub struct KnownCommands {
    commands: HashMap<Vec<u8>, CommandTraits>,
}

/// More than this many names are not remembered: a client sending random names must
/// not grow the module's memory.
const MAX_KNOWN_COMMANDS: usize = 1024;

impl KnownCommands {
    pub fn get(&self, name: &[u8]) -> Option<&CommandTraits> {
        // Command names are short: lower-cased on the stack, no allocation per call.
        let mut short = [0u8; 32];
        match short.get_mut(..name.len()) {
            Some(lower) => {
                lower.copy_from_slice(name);
                lower.make_ascii_lowercase();
                self.commands.get(&*lower)
            }
            None => self.commands.get(&name.to_ascii_lowercase()),
        }
    }

    pub fn learn(&mut self, name: &[u8], traits: CommandTraits) {
        if self.commands.len() < MAX_KNOWN_COMMANDS {
            self.commands.insert(name.to_ascii_lowercase(), traits);
        }
    }
}

/// Why an inner command is refused before the lock is looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Unknown(String),
    WrongArity(String),
    Blocking(String),
    Transaction(String),
    PubSub(String),
    OwnModule(String),
    NotInModuleCall(String),
    ScriptWithoutKeys,
    ScriptInScript,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cannot = |f: &mut std::fmt::Formatter<'_>, name: &str, why: &str| {
            write!(f, "ERR RLOCK.GUARD cannot run '{name}': {why}")
        };
        match self {
            Refusal::Unknown(name) => write!(f, "ERR unknown command '{name}' inside RLOCK.GUARD"),
            Refusal::WrongArity(name) => write!(
                f,
                "ERR wrong number of arguments for '{name}' inside RLOCK.GUARD"
            ),
            Refusal::Blocking(name) => cannot(f, name, "a blocking command"),
            Refusal::Transaction(name) => cannot(f, name, "a transaction command"),
            Refusal::PubSub(name) => cannot(f, name, "a pub/sub command"),
            Refusal::OwnModule(name) => cannot(f, name, "a command of the rlock module"),
            Refusal::NotInModuleCall(name) => cannot(f, name, "not allowed in a module call"),
            Refusal::ScriptWithoutKeys => write!(
                f,
                "ERR RLOCK.GUARD runs a script only with its keys declared (numkeys 1 or more)"
            ),
            Refusal::ScriptInScript => {
                write!(f, "ERR RLOCK.GUARD cannot run a script inside a script")
            }
        }
    }
}

const TRANSACTION: [&[u8]; 5] = [b"multi", b"exec", b"discard", b"watch", b"unwatch"];
const SCRIPTS: [&[u8]; 6] = [
    b"eval",
    b"evalsha",
    b"eval_ro",
    b"evalsha_ro",
    b"fcall",
    b"fcall_ro",
];
/// `WAIT` and `WAITAOF` wait for replicas or the disk, which a module's call cannot.
const WAITS: [&[u8]; 2] = [b"wait", b"waitaof"];
const OWN_PREFIXES: [&[u8]; 3] = [b"rlock.", b"rsem.", b"rlatch."];

/// Whether a guard may run `argv` (the inner command, its name first), the server
/// having described it as `traits` (`None`: it does not know the command).
pub fn refusal(argv: &[&[u8]], traits: Option<&CommandTraits>, in_script: bool) -> Option<Refusal> {
    let name = argv
        .first()
        .copied()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let Some(traits) = traits else {
        return Some(Refusal::Unknown(printable(
            argv.first().copied().unwrap_or_default(),
        )));
    };
    // A container's subcommand has its own arity and flags (`CLIENT KILL`). The names are
    // made printable only for a refusal: the common call goes without.
    let sub = match argv.get(1) {
        Some(sub) if !traits.subcommands.is_empty() => Some(sub.to_ascii_lowercase()),
        _ => None,
    };
    let shown = || match &sub {
        Some(sub) => format!("{}|{}", printable(&name), printable(sub)),
        None => printable(&name),
    };
    let traits = match &sub {
        Some(sub) => match traits.subcommands.get(sub) {
            Some(sub_traits) => sub_traits,
            None => return Some(Refusal::Unknown(shown())),
        },
        None => traits,
    };
    let argc = argv.len() as i64;
    let arity_ok = match traits.arity {
        n if n >= 0 => argc == n,
        n => argc >= -n,
    };
    if !arity_ok {
        return Some(Refusal::WrongArity(shown()));
    }
    if OWN_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Some(Refusal::OwnModule(shown()));
    }
    if TRANSACTION.contains(&name.as_slice()) {
        return Some(Refusal::Transaction(shown()));
    }
    if traits.blocking || WAITS.contains(&name.as_slice()) {
        return Some(Refusal::Blocking(shown()));
    }
    if traits.pubsub {
        return Some(Refusal::PubSub(shown()));
    }
    if SCRIPTS.contains(&name.as_slice()) {
        if in_script {
            return Some(Refusal::ScriptInScript);
        }
        let declared = argv.get(2).and_then(|n| parse_i64(n)).unwrap_or(0);
        return (declared < 1).then_some(Refusal::ScriptWithoutKeys);
    }
    if traits.noscript {
        return Some(Refusal::NotInModuleCall(shown()));
    }
    None
}

/// Whether `name` runs a script (`EVAL`, `FCALL`, ...): only then does it matter whether
/// the guard itself runs inside one.
pub fn is_script(name: &[u8]) -> bool {
    SCRIPTS.iter().any(|s| name.eq_ignore_ascii_case(s))
}

/// What a guard does, once its command may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    Run,
    NotHeld,
    /// `TOKEN n` was given and the counter holds `newest` (none: no counter).
    StaleToken {
        newest: Option<i64>,
    },
}

/// Whether the call runs: the owner holds the lock, and a token given is still the
/// lock's newest.
pub fn decide(held: bool, asked: Option<i64>, newest: Option<i64>) -> Guard {
    match (held, asked) {
        (false, _) => Guard::NotHeld,
        (true, Some(asked)) if Some(asked) != newest => Guard::StaleToken { newest },
        (true, _) => Guard::Run,
    }
}

/// The error line of a stale token, `asked` being the token the call gave.
pub fn stale_token_line(asked: i64, newest: Option<i64>) -> String {
    match newest {
        Some(newest) => {
            format!("STALETOKEN the lock's fencing token is now {newest}, not {asked}")
        }
        None => format!("STALETOKEN the lock has no fencing token, not {asked}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traits(arity: i64) -> CommandTraits {
        CommandTraits {
            arity,
            ..Default::default()
        }
    }

    fn check(argv: &[&str], traits: Option<&CommandTraits>) -> Option<Refusal> {
        refusal(&crate::core::words(argv), traits, false)
    }

    #[test]
    fn plain_commands_run_with_their_arity() {
        assert_eq!(check(&["SET", "k", "v"], Some(&traits(-3))), None);
        assert_eq!(
            check(&["SET", "k"], Some(&traits(-3))),
            Some(Refusal::WrongArity("set".into()))
        );
        assert_eq!(
            check(&["GET", "k", "x"], Some(&traits(2))),
            Some(Refusal::WrongArity("get".into()))
        );
        assert_eq!(
            check(&["Nope"], None),
            Some(Refusal::Unknown("Nope".into()))
        );
    }

    #[test]
    fn unsafe_commands_are_refused() {
        let blocking = CommandTraits {
            blocking: true,
            ..traits(-3)
        };
        let noscript = CommandTraits {
            noscript: true,
            ..traits(-1)
        };
        let pubsub = CommandTraits {
            pubsub: true,
            ..traits(3)
        };
        let (wait, guard) = (traits(3), traits(-5));
        let refused: [(&[&str], &CommandTraits, Refusal); 6] = [
            (
                &["BLPOP", "k", "0"],
                &blocking,
                Refusal::Blocking("blpop".into()),
            ),
            (&["WAIT", "1", "0"], &wait, Refusal::Blocking("wait".into())),
            (&["MULTI"], &noscript, Refusal::Transaction("multi".into())),
            (
                &["MONITOR"],
                &noscript,
                Refusal::NotInModuleCall("monitor".into()),
            ),
            (
                &["PUBLISH", "c", "m"],
                &pubsub,
                Refusal::PubSub("publish".into()),
            ),
            (
                &["RLOCK.GUARD", "k", "o", "CALL", "GET", "x"],
                &guard,
                Refusal::OwnModule("rlock.guard".into()),
            ),
        ];
        for (argv, traits, refusal) in refused {
            assert_eq!(check(argv, Some(traits)), Some(refusal), "{argv:?}");
        }
    }

    #[test]
    fn scripts_run_only_with_declared_keys_and_not_from_a_script() {
        let eval = CommandTraits {
            noscript: true,
            ..traits(-3)
        };
        assert_eq!(check(&["EVAL", "return 1", "1", "k"], Some(&eval)), None);
        assert_eq!(
            check(&["EVAL", "return 1", "0"], Some(&eval)),
            Some(Refusal::ScriptWithoutKeys)
        );
        let argv: Vec<&[u8]> = vec![b"FCALL", b"f", b"1", b"k"];
        assert_eq!(
            refusal(&argv, Some(&eval), true),
            Some(Refusal::ScriptInScript)
        );
    }

    #[test]
    fn subcommands_have_their_own_traits() {
        let mut client = traits(-2);
        let kill = CommandTraits {
            noscript: true,
            ..traits(-3)
        };
        client.subcommands.insert(b"kill".to_vec(), kill);
        assert_eq!(
            check(&["CLIENT", "KILL", "x"], Some(&client)),
            Some(Refusal::NotInModuleCall("client|kill".into()))
        );
        assert_eq!(
            check(&["CLIENT", "NOPE"], Some(&client)),
            Some(Refusal::Unknown("client|nope".into()))
        );
    }

    #[test]
    fn a_guard_runs_only_for_the_holder_of_the_newest_token() {
        assert_eq!(decide(true, None, None), Guard::Run);
        assert_eq!(decide(true, Some(7), Some(7)), Guard::Run);
        assert_eq!(decide(false, Some(7), Some(7)), Guard::NotHeld);
        assert_eq!(
            decide(true, Some(7), Some(8)),
            Guard::StaleToken { newest: Some(8) }
        );
        assert_eq!(
            decide(true, Some(9), Some(8)),
            Guard::StaleToken { newest: Some(8) }
        );
        assert_eq!(
            decide(true, Some(1), None),
            Guard::StaleToken { newest: None }
        );
        assert_eq!(
            stale_token_line(7, Some(8)),
            "STALETOKEN the lock's fencing token is now 8, not 7"
        );
    }

    #[test]
    fn known_commands_are_case_blind_and_bounded() {
        let mut known = KnownCommands::default();
        known.learn(b"SET", traits(-3));
        assert_eq!(known.get(b"set"), Some(&traits(-3)));
        for n in 0..2 * MAX_KNOWN_COMMANDS {
            known.learn(format!("c{n}").as_bytes(), traits(1));
        }
        assert_eq!(known.commands.len(), MAX_KNOWN_COMMANDS);
    }
}

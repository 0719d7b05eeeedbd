//! In-memory fakes of the two ports, for unit tests of the Rust logic around the scripts: what
//! the domain sends, and what it makes of each reply. The scripts themselves are tested on a
//! real `redis-server` (`tests/`); nothing here runs Lua.

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};

use crate::scripts;
use crate::sql::{Cell, DbError, Param, Rows, Sql};
use crate::store::{Replies, Reply, Store, StoreError, StoreErrorKind};

/// One command a fake received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `EVALSHA` or `EVAL`.
    pub command: &'static str,
    /// The script's name.
    pub script: &'static str,
    /// Its keys.
    pub keys: Vec<String>,
    /// Its arguments.
    pub args: Vec<String>,
}

/// A Redis that answers each script with the replies queued for it, in order. It holds a
/// script once EVAL has sent it (or [`FakeStore::holding_every_script`]); before that EVALSHA
/// answers NOSCRIPT, as a real Redis after a restart.
#[derive(Default)]
pub struct FakeStore {
    loaded: RefCell<HashSet<&'static str>>,
    replies: RefCell<VecDeque<(&'static str, Result<Replies, StoreError>)>>,
    /// Every command received.
    pub calls: RefCell<Vec<Call>>,
}

impl FakeStore {
    /// A Redis that already holds every script.
    pub fn holding_every_script() -> Self {
        let store = FakeStore::default();
        store
            .loaded
            .borrow_mut()
            .extend(scripts::ALL.iter().map(|s| s.sha));
        store
    }

    /// The next run of `script` replies `replies`.
    pub fn answers(self, script: &'static scripts::Script, replies: &[Reply]) -> Self {
        self.replies
            .borrow_mut()
            .push_back((script.name, Ok(Replies(replies.to_vec()))));
        self
    }

    /// The next run of `script` fails with `error`.
    pub fn fails(self, script: &'static scripts::Script, error: StoreError) -> Self {
        self.replies
            .borrow_mut()
            .push_back((script.name, Err(error)));
        self
    }

    /// The commands received, as (command, script) pairs.
    pub fn commands(&self) -> Vec<(&'static str, &'static str)> {
        self.calls
            .borrow()
            .iter()
            .map(|c| (c.command, c.script))
            .collect()
    }

    fn reply(
        &self,
        command: &'static str,
        script: &'static scripts::Script,
        keys: &[String],
        args: &[String],
    ) -> Result<Replies, StoreError> {
        self.calls.borrow_mut().push(Call {
            command,
            script: script.name,
            keys: keys.to_vec(),
            args: args.to_vec(),
        });
        let (expected, reply) = self
            .replies
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| panic!("{} ran with no reply queued", script.name));
        assert_eq!(expected, script.name, "scripts ran in another order");
        reply
    }
}

impl Store for FakeStore {
    fn evalsha(&self, sha: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        let script = scripts::by_sha(sha).expect("a script of ours");
        if !self.loaded.borrow().contains(script.sha) {
            self.calls.borrow_mut().push(Call {
                command: "EVALSHA",
                script: script.name,
                keys: keys.to_vec(),
                args: args.to_vec(),
            });
            return Err(StoreError::new(
                StoreErrorKind::NoScript,
                "NOSCRIPT No matching script",
            ));
        }
        self.reply("EVALSHA", script, keys, args)
    }

    fn eval(&self, source: &str, keys: &[String], args: &[String]) -> Result<Replies, StoreError> {
        let script = scripts::ALL
            .iter()
            .copied()
            .find(|s| s.source == source)
            .expect("a script of ours");
        self.loaded.borrow_mut().insert(script.sha);
        self.reply("EVAL", script, keys, args)
    }
}

/// An orders database that answers each statement with the result queued for it, in order,
/// and records what ran.
#[derive(Default)]
pub struct FakeSql {
    results: RefCell<VecDeque<Result<Outcome, DbError>>>,
    /// Every statement run, its whitespace folded, with its parameters.
    pub statements: RefCell<Vec<(String, Vec<Param>)>>,
}

/// What a statement returns.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// `execute`: rows changed.
    Changed(u64),
    /// `query`: rows.
    Rows(Vec<Vec<Cell>>),
}

impl FakeSql {
    /// The next statement gets `outcome`. BEGIN, COMMIT and ROLLBACK need none: they succeed.
    pub fn then(self, outcome: Outcome) -> Self {
        self.results.borrow_mut().push_back(Ok(outcome));
        self
    }

    /// The next statement fails with `error`.
    pub fn then_fail(self, error: DbError) -> Self {
        self.results.borrow_mut().push_back(Err(error));
        self
    }

    /// The statements run, each cut to its first word (`BEGIN`, `UPDATE`…).
    pub fn verbs(&self) -> Vec<String> {
        self.statements
            .borrow()
            .iter()
            .map(|(s, _)| s.split(' ').next().unwrap_or_default().to_owned())
            .collect()
    }

    /// The statements run, whole.
    pub fn statements(&self) -> Vec<String> {
        self.statements
            .borrow()
            .iter()
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn next(&self, statement: &str, params: &[Param]) -> Result<Option<Outcome>, DbError> {
        let folded = statement.split_whitespace().collect::<Vec<_>>().join(" ");
        let control = matches!(folded.as_str(), "BEGIN" | "COMMIT" | "ROLLBACK");
        self.statements
            .borrow_mut()
            .push((folded.clone(), params.to_vec()));
        if control {
            return Ok(None);
        }
        let outcome = self
            .results
            .borrow_mut()
            .pop_front()
            .unwrap_or_else(|| panic!("no result queued for {folded}"))?;
        Ok(Some(outcome))
    }
}

impl Sql for FakeSql {
    fn execute(&self, statement: &str, params: &[Param]) -> Result<u64, DbError> {
        match self.next(statement, params)? {
            None => Ok(0),
            Some(Outcome::Changed(n)) => Ok(n),
            Some(other) => panic!("{statement}: execute got {other:?}"),
        }
    }

    fn query(&self, statement: &str, params: &[Param]) -> Result<Rows, DbError> {
        match self.next(statement, params)? {
            Some(Outcome::Rows(rows)) => Ok(Rows { rows }),
            other => panic!("{statement}: query got {other:?}"),
        }
    }
}

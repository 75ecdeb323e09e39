//! The host's side of a component in a child: a [`Proxy`] asks each question over the
//! connection once (the answers depend on the call's data only, so each is kept by the call's
//! JSON: a search asks the same plans' questions again and again). Each category's backend on
//! it, whose answers go through the same checked adapter as an in-process library's, is in
//! that category's module (`crate::strategy::isolate`, `crate::execution::isolate`,
//! `crate::topology::isolate`).

use super::protocol::{Answer, Call};
use super::Connection;
use crate::call::CallError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One component in the child, and the answers it gave.
pub(crate) struct Proxy {
    conn: Arc<Connection>,
    pub(crate) handle: usize,
    answers: Mutex<HashMap<String, Result<Answer, CallError>>>,
}

impl Proxy {
    pub(super) fn new(conn: &Arc<Connection>, handle: usize) -> Self {
        Proxy {
            conn: conn.clone(),
            handle,
            answers: Mutex::new(HashMap::new()),
        }
    }

    /// The answer to `call` (named `what` in messages), asked once.
    pub(crate) fn ask(&self, what: &str, call: Call) -> Result<Answer, CallError> {
        let key = serde_json::to_string(&call).unwrap_or_default();
        if let Some(v) = self.answers.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return v;
        }
        let v = self.conn.call(what, call);
        if let Ok(mut c) = self.answers.lock() {
            c.insert(key, v.clone());
        }
        v
    }

    /// The connection's error for a bad answer or a bad call (`message` says which).
    pub(crate) fn fail(&self, message: String) -> CallError {
        self.conn.fail(message)
    }

    pub(crate) fn other(&self, what: &str) -> CallError {
        self.conn
            .fail(format!("answered `{what}` with another kind of answer"))
    }

    pub(crate) fn number(&self, what: &str, call: Call) -> Result<f64, CallError> {
        match self.ask(what, call)? {
            Answer::Number(x) => Ok(x),
            _ => Err(self.other(what)),
        }
    }

    pub(crate) fn done(&self, what: &str, call: Call) -> Result<(), CallError> {
        match self.ask(what, call)? {
            Answer::Done => Ok(()),
            _ => Err(self.other(what)),
        }
    }
}

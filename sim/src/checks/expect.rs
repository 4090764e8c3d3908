//! A hand-written scenario's own `expect` section (exit code, tools run, requests sent).

use openmax_core::machine::Effect;

use crate::scenario::Scenario;
use crate::trace::Run;

/// A scenario's `expect` section.
pub fn scenario_expectations(sc: &Scenario, run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(code) = sc.expect.exit_code {
        if run.exit_code != Some(code) {
            v.push(format!("expected exit {code}, got {:?}", run.exit_code));
        }
    }
    if let Some(want) = &sc.expect.run_tools {
        let got: Vec<String> = run
            .effects()
            .filter_map(|(_, e)| match e {
                Effect::RunTool { call_id, .. } => Some(call_id.clone()),
                _ => None,
            })
            .collect();
        if &got != want {
            v.push(format!("expected RunTool for {want:?}, got {got:?}"));
        }
    }
    if let Some(n) = sc.expect.requests_sent {
        if run.sends.len() != n {
            v.push(format!(
                "expected {n} requests sent, got {}",
                run.sends.len()
            ));
        }
    }
    v
}

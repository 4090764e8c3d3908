//! The `--acp` happy path driven by the `agent-client-protocol` crate's own client side (the
//! Rust SDK): initialize, a new session, a prompt whose chunks arrive in order, `end_turn`.

use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ContentBlock, InitializeRequest, NewSessionRequest, PromptRequest, SessionNotification,
    SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent};
use openmax_tests::*;

#[test]
fn the_rust_sdk_client_runs_a_prompt_to_end_turn() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![Reply::Stream {
        items: ["Hel", "lo ", "from ", "Rust"]
            .iter()
            .map(|t| StreamItem::Text {
                text: t.to_string(),
            })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut config = AcpAgentConfig::new(openmax_bin())
        .arg("--acp")
        .env("HOME", env.home.display().to_string())
        .env("OPENMAX_HOME", env.home.display().to_string());
    for (k, v) in &env.env {
        config = config.env(k, v);
    }
    let agent = AcpAgent::new(config);
    let chunks = Arc::new(Mutex::new(String::new()));
    let seen = chunks.clone();
    let project = env.project.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let stop = rt.block_on(async move {
        tokio::time::timeout(
            DEADLINE,
            agent_client_protocol::Client
                .v1()
                .on_receive_notification(
                    async move |n: SessionNotification, _cx| {
                        if let SessionUpdate::AgentMessageChunk(c) = n.update {
                            if let ContentBlock::Text(t) = c.content {
                                seen.lock().unwrap().push_str(&t.text);
                            }
                        }
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .connect_with(agent, |connection: ConnectionTo<Agent>| async move {
                    let init = connection
                        .send_request(InitializeRequest::new(ProtocolVersion::V1))
                        .block_task()
                        .await?;
                    assert_eq!(init.protocol_version, ProtocolVersion::V1);
                    let session = connection
                        .send_request(NewSessionRequest::new(project))
                        .block_task()
                        .await?;
                    let r = connection
                        .send_request(PromptRequest::new(
                            session.session_id,
                            vec![ContentBlock::Text(TextContent::new("hi"))],
                        ))
                        .block_task()
                        .await?;
                    Ok(r.stop_reason)
                }),
        )
        .await
        .expect("the prompt is answered in time")
        .expect("the SDK client ran")
    });
    assert_eq!(stop, StopReason::EndTurn);
    assert_eq!(*chunks.lock().unwrap(), "Hello from Rust");
}

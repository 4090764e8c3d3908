//! The loopback mock provider: a hyper server on 127.0.0.1 serving [`crate::script::Reply`]
//! scripts as Anthropic Messages, OpenAI Responses and Chat Completions streams, with faults.
//! (Filled in by the mock work.)

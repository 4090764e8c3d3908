//! Provider adapters: model requests over hyper 1.x + rustls, SSE decoding, and one pure mapping
//! per API (`anthropic`, `openai`, `openai-chat`) from wire JSON to the core's normalized
//! [`openmax_core::provider::ProviderItem`]s. (Filled in by the provider work.)

//! The models the papers use, as `ModelSpec`s: `perfcast-core`'s fixtures.

pub use perfcast_core::fixtures::{deepseek_v3, gpt, llama2};

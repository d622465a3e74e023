//! Token lengths for inputs that carry none (rate series, ServeGen): each request takes the
//! (prompt, output) pair of a request drawn uniformly, with replacement, from a request trace
//! (by default the shipped Azure conversation trace). Pairs are kept together, so the
//! correlation of prompt and output length in the trace is kept too.

use std::path::Path;
use std::sync::Arc;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::sim::trace::{self, TraceError};

/// The (input, output) token pairs of a trace.
#[derive(Clone, Debug)]
pub struct TokenPool {
    pairs: Arc<Vec<(u32, u32)>>,
}

impl TokenPool {
    pub fn load(path: &Path) -> Result<TokenPool, TraceError> {
        let pairs = trace::open(path)?
            .map(|r| r.map(|r| (r.input_tokens, r.output_tokens)))
            .collect::<Result<Vec<_>, _>>()?;
        if pairs.is_empty() {
            return Err(TraceError::Format {
                path: path.display().to_string(),
                message: "no requests to take token lengths from".into(),
            });
        }
        Ok(TokenPool::from_pairs(pairs))
    }

    pub fn from_pairs(pairs: Vec<(u32, u32)>) -> TokenPool {
        assert!(!pairs.is_empty(), "a token pool needs at least one pair");
        TokenPool {
            pairs: Arc::new(pairs),
        }
    }

    pub fn sample(&self, rng: &mut ChaCha8Rng) -> (u32, u32) {
        self.pairs[rng.random_range(0..self.pairs.len())]
    }
}

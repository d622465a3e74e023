//! Arrivals of one source whose inter-arrival distribution changes piece by piece (a rate row,
//! a ServeGen client's 600 s window), as a renewal process carried across the piece boundaries.
//!
//! Carrying works by a change of time: within a piece, gaps are drawn from that piece's
//! distribution in seconds; a gap that runs past the piece's end is converted into units of the
//! piece's mean gap, and what is left of it is finished in the next piece at that piece's mean
//! gap (pieces without requests are skipped, the remainder kept). So a steady source is an exact
//! renewal process however it is cut into pieces, and no boundary restarts a source: restarting
//! every client at every boundary would line their first arrivals up and create spikes the data
//! does not have (../shared/traces/README.md).
//!
//! The very first arrival is drawn at a stationary phase: the forward recurrence time, a uniform
//! fraction of a length-biased gap (Gamma(k, θ) length-biased is Gamma(k+1, θ); Weibull(k, λ)
//! length-biased is λ·G^(1/k) with G ~ Gamma(1 + 1/k, 1)).

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Exp, Gamma, Weibull};

/// An inter-arrival distribution, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gap {
    /// Poisson arrivals: exponential gaps with this mean.
    Exponential {
        mean: f64,
    },
    Gamma {
        shape: f64,
        scale: f64,
    },
    Weibull {
        shape: f64,
        scale: f64,
    },
}

impl Gap {
    /// Gamma gaps with mean `1 / rate` and coefficient of variation `cv` (shape 1/cv²);
    /// exponential when `cv` is absent or exactly 1.
    pub fn from_rate(rate: f64, cv: Option<f64>) -> Gap {
        match cv {
            Some(cv) if cv != 1.0 => {
                let shape = 1.0 / (cv * cv);
                Gap::Gamma {
                    shape,
                    scale: 1.0 / (rate * shape),
                }
            }
            _ => Gap::Exponential { mean: 1.0 / rate },
        }
    }

    /// The mean gap in seconds.
    pub fn mean(&self) -> f64 {
        match *self {
            Gap::Exponential { mean } => mean,
            Gap::Gamma { shape, scale } => shape * scale,
            Gap::Weibull { shape, scale } => scale * libm::tgamma(1.0 + 1.0 / shape),
        }
    }

    /// The same shape with every gap multiplied by `factor` (rates divided by it).
    pub fn stretched(self, factor: f64) -> Gap {
        match self {
            Gap::Exponential { mean } => Gap::Exponential {
                mean: mean * factor,
            },
            Gap::Gamma { shape, scale } => Gap::Gamma {
                shape,
                scale: scale * factor,
            },
            Gap::Weibull { shape, scale } => Gap::Weibull {
                shape,
                scale: scale * factor,
            },
        }
    }

    /// Positive finite parameters, or why not.
    pub fn check(&self) -> Result<(), String> {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        let fine = match *self {
            Gap::Exponential { mean } => ok(mean),
            Gap::Gamma { shape, scale } | Gap::Weibull { shape, scale } => ok(shape) && ok(scale),
        };
        if fine && self.mean().is_finite() && self.mean() > 0.0 {
            Ok(())
        } else {
            Err(format!(
                "inter-arrival parameters {self:?} must be positive and finite"
            ))
        }
    }
}

/// A prepared sampler of one `Gap` (building one per draw would be slow).
#[derive(Clone, Copy, Debug)]
enum Sampler {
    Exp(Exp<f64>),
    Gamma(Gamma<f64>),
    Weibull(Weibull<f64>),
}

impl Sampler {
    fn new(gap: Gap) -> Sampler {
        match gap {
            Gap::Exponential { mean } => Sampler::Exp(Exp::new(1.0 / mean).expect("checked gap")),
            Gap::Gamma { shape, scale } => {
                Sampler::Gamma(Gamma::new(shape, scale).expect("checked gap"))
            }
            Gap::Weibull { shape, scale } => {
                Sampler::Weibull(Weibull::new(scale, shape).expect("checked gap"))
            }
        }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        match self {
            Sampler::Exp(d) => d.sample(rng),
            Sampler::Gamma(d) => d.sample(rng),
            Sampler::Weibull(d) => d.sample(rng),
        }
    }
}

/// The forward recurrence time of a stationary renewal process with these gaps.
fn stationary_residual(gap: Gap, rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random();
    let biased = match gap {
        Gap::Exponential { mean } => return Exp::new(1.0 / mean).expect("checked").sample(rng),
        Gap::Gamma { shape, scale } => Gamma::new(shape + 1.0, scale).expect("checked").sample(rng),
        Gap::Weibull { shape, scale } => {
            let g: f64 = Gamma::new(1.0 + 1.0 / shape, 1.0)
                .expect("checked")
                .sample(rng);
            scale * g.powf(1.0 / shape)
        }
    };
    u * biased
}

/// A stretch of time with one inter-arrival distribution; `None`: no requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Piece {
    pub start: f64,
    pub end: f64,
    pub gap: Option<Gap>,
}

/// The piece being played, with its prepared sampler and mean gap.
struct Current {
    end: f64,
    gap: Gap,
    sampler: Sampler,
    mean: f64,
}

/// Arrival times (seconds, ascending) of one source over its pieces.
pub struct Renewal<P> {
    pieces: P,
    current: Option<Current>,
    t: f64,
    /// What is left of the pending gap, in mean gaps of the piece it is finished in; `None`
    /// before the first arrival.
    residual: Option<f64>,
    rng: ChaCha8Rng,
}

impl<P: Iterator<Item = Piece>> Renewal<P> {
    /// Pieces must be in time order and not overlap; gaps between them have no requests.
    pub fn new(pieces: P, rng: ChaCha8Rng) -> Self {
        Renewal {
            pieces,
            current: None,
            t: f64::NEG_INFINITY,
            residual: None,
            rng,
        }
    }

    /// Moves to the next piece with requests; false at the end.
    fn advance(&mut self) -> bool {
        for piece in self.pieces.by_ref() {
            self.t = self.t.max(piece.start);
            if let Some(gap) = piece.gap.filter(|_| piece.end > self.t) {
                self.current = Some(Current {
                    end: piece.end,
                    gap,
                    sampler: Sampler::new(gap),
                    mean: gap.mean(),
                });
                return true;
            }
        }
        self.current = None;
        false
    }
}

impl<P: Iterator<Item = Piece>> Iterator for Renewal<P> {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        loop {
            if self.current.is_none() && !self.advance() {
                return None;
            }
            let c = self.current.as_ref().expect("advanced");
            let residual = match self.residual {
                Some(r) => r,
                None => stationary_residual(c.gap, &mut self.rng) / c.mean,
            };
            let at = self.t + residual * c.mean;
            if at < c.end {
                self.t = at;
                self.residual = Some(c.sampler.sample(&mut self.rng) / c.mean);
                return Some(at);
            }
            // Finish the gap in the next piece, in its own time units.
            self.residual = Some((residual - (c.end - self.t) / c.mean).max(0.0));
            self.t = c.end;
            self.current = None;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::SeedableRng;

    pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(seed)
    }

    /// `n` pieces of `len` seconds with the same gaps.
    fn steady(gap: Gap, n: usize, len: f64) -> Vec<Piece> {
        (0..n)
            .map(|i| Piece {
                start: i as f64 * len,
                end: (i + 1) as f64 * len,
                gap: Some(gap),
            })
            .collect()
    }

    fn mean_gap(times: &[f64]) -> f64 {
        (times[times.len() - 1] - times[0]) / (times.len() - 1) as f64
    }

    #[test]
    fn weibull_parameters_are_honoured_across_pieces() {
        // Mean gap = scale * Γ(1 + 1/shape): shape 0.5 gives Γ(3) = 2, shape 2 gives
        // Γ(1.5) = √π/2 = 0.886227.
        for (shape, scale, mean) in [(0.5, 1.5, 3.0), (2.0, 2.0, 2.0 * 0.886_226_925)] {
            let gap = Gap::Weibull { shape, scale };
            assert!((gap.mean() - mean).abs() < 1e-9, "{shape}");
            let times: Vec<f64> =
                Renewal::new(steady(gap, 1000, 600.0).into_iter(), rng(3)).collect();
            // About 200,000 (shape 0.5) or 340,000 gaps. The gap's standard deviation is
            // scale*sqrt(Γ(1+2/k) - Γ(1+1/k)²): √20 * 1.5 = 6.7 s and 0.93 s; 5 standard
            // errors of the mean are < 0.075 s and < 0.008 s.
            let tolerance = if shape < 1.0 { 0.075 } else { 0.008 };
            assert!(
                (mean_gap(&times) - mean).abs() < tolerance,
                "{shape}: {}",
                mean_gap(&times)
            );
        }
    }

    #[test]
    fn each_piece_runs_at_its_own_rate_and_empty_pieces_have_nothing() {
        let pieces = vec![
            Piece {
                start: 0.0,
                end: 1000.0,
                gap: Some(Gap::from_rate(2.0, Some(2.0))),
            },
            Piece {
                start: 1000.0,
                end: 2000.0,
                gap: None,
            },
            Piece {
                start: 2000.0,
                end: 3000.0,
                gap: Some(Gap::from_rate(10.0, None)),
            },
        ];
        let times: Vec<f64> = Renewal::new(pieces.into_iter(), rng(5)).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        let count = |a: f64, b: f64| times.iter().filter(|&&t| t >= a && t < b).count() as f64;
        // 2,000 expected with cv 2: the count's standard deviation is about cv * sqrt(2000) = 89;
        // 10,000 Poisson: 100. Five of each.
        assert!((count(0.0, 1000.0) - 2000.0).abs() < 450.0);
        assert_eq!(count(1000.0, 2000.0), 0.0);
        assert!((count(2000.0, 3000.0) - 10_000.0).abs() < 500.0);
    }
}

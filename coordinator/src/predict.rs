//! Predicting the next window's load of a name or a group from its past windows, sans I/O.
//!
//! Two predictors: the baseline, an exponentially weighted moving average (EWMA), and a small
//! learned model, a ridge regression over the last [`LAGS`] windows and the EWMA, each sample
//! scaled by its series' own level so that hot and cold names train one model (Origami
//! normalizes its features the same way, §4.3). Origami trains gradient-boosted trees on
//! recorded traces and finds that the model matters less than Meta-OPT's filtering (its
//! three models gave nearly the same decisions); a linear model trains in microseconds on the
//! coordinator from the windows it already keeps, and needs no crate. [`evaluate`] compares the
//! two on held-out windows (the later part of each trace).

/// Past windows a sample of the learned model looks at.
pub const LAGS: usize = 3;
const FEATURES: usize = LAGS + 2;

/// The baseline: `alpha` of the newest window, the rest from the older ones.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ewma {
    pub alpha: f64,
}

impl Default for Ewma {
    fn default() -> Self {
        Self { alpha: 0.5 }
    }
}

impl Ewma {
    /// The average over `history` (oldest first); 0 for none.
    pub fn predict(&self, history: &[f64]) -> f64 {
        let mut it = history.iter();
        let Some(&first) = it.next() else {
            return 0.0;
        };
        it.fold(first, |avg, &x| self.alpha * x + (1.0 - self.alpha) * avg)
    }
}

/// The learned model: weights over (1, the last `LAGS` windows newest first, the EWMA), all
/// scaled by the series' level.
#[derive(Clone, Debug, PartialEq)]
pub struct Linear {
    pub weights: [f64; FEATURES],
    pub ewma: Ewma,
}

/// A sample's features scaled by its level, and the level.
fn features(history: &[f64], ewma: Ewma) -> Option<([f64; FEATURES], f64)> {
    if history.len() < LAGS {
        return None;
    }
    let last = &history[history.len() - LAGS..];
    let avg = ewma.predict(history);
    let level = (last.iter().sum::<f64>() / LAGS as f64).max(avg).max(1.0);
    let mut f = [0.0; FEATURES];
    f[0] = 1.0;
    for (i, x) in last.iter().rev().enumerate() {
        f[1 + i] = x / level;
    }
    f[FEATURES - 1] = avg / level;
    Some((f, level))
}

/// Solves `a x = b` (Gaussian elimination with partial pivoting); `None` when singular.
fn solve(mut a: [[f64; FEATURES]; FEATURES], mut b: [f64; FEATURES]) -> Option<[f64; FEATURES]> {
    for col in 0..FEATURES {
        let pivot = (col..FEATURES).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (pivot_row, pivot_b) = (a[col], b[col]);
        for row in col + 1..FEATURES {
            let f = a[row][col] / pivot_row[col];
            for (x, p) in a[row].iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[row] -= f * pivot_b;
        }
    }
    let mut x = [0.0; FEATURES];
    for row in (0..FEATURES).rev() {
        let rest: f64 = (row + 1..FEATURES).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - rest) / a[row][row];
    }
    Some(x)
}

impl Linear {
    /// Fits the weights to every (window, next window) pair of every series in `traces`
    /// (oldest first) with ridge penalty `lambda`; `None` with too few samples.
    pub fn fit(traces: &[Vec<f64>], ewma: Ewma, lambda: f64) -> Option<Self> {
        let mut xtx = [[0.0; FEATURES]; FEATURES];
        let mut xty = [0.0; FEATURES];
        let mut samples = 0;
        for trace in traces {
            for end in LAGS..trace.len() {
                let Some((f, level)) = features(&trace[..end], ewma) else {
                    continue;
                };
                let y = trace[end] / level;
                for i in 0..FEATURES {
                    for j in 0..FEATURES {
                        xtx[i][j] += f[i] * f[j];
                    }
                    xty[i] += f[i] * y;
                }
                samples += 1;
            }
        }
        if samples < FEATURES * 2 {
            return None;
        }
        for (i, row) in xtx.iter_mut().enumerate().skip(1) {
            row[i] += lambda;
        }
        solve(xtx, xty).map(|weights| Self { weights, ewma })
    }

    /// The next window after `history` (oldest first): the EWMA while the history is
    /// shorter than the model looks; never below 0.
    pub fn predict(&self, history: &[f64]) -> f64 {
        match features(history, self.ewma) {
            None => self.ewma.predict(history),
            Some((f, level)) => {
                let y: f64 = f.iter().zip(self.weights).map(|(x, w)| x * w).sum();
                (y * level).max(0.0)
            }
        }
    }
}

/// How the two predictors did on held-out windows.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Evaluation {
    /// Windows predicted.
    pub samples: usize,
    /// Mean absolute error over their load, each predictor (0: perfect; 1: off by as much
    /// as the load itself).
    pub ewma_error: f64,
    pub model_error: f64,
}

/// Trains on the first `train` share of each trace's windows and predicts every later one,
/// with both predictors; `None` when the traces are too short to train on.
pub fn evaluate(traces: &[Vec<f64>], train: f64, ewma: Ewma) -> Option<Evaluation> {
    let cut = |t: &Vec<f64>| ((t.len() as f64 * train) as usize).max(LAGS + 1);
    let training: Vec<Vec<f64>> = traces
        .iter()
        .map(|t| t[..cut(t).min(t.len())].to_vec())
        .collect();
    let model = Linear::fit(&training, ewma, 0.01)?;
    let (mut e_ewma, mut e_model, mut total, mut samples) = (0.0, 0.0, 0.0, 0);
    for t in traces {
        for end in cut(t)..t.len() {
            let actual = t[end];
            e_ewma += (ewma.predict(&t[..end]) - actual).abs();
            e_model += (model.predict(&t[..end]) - actual).abs();
            total += actual;
            samples += 1;
        }
    }
    let total = if total > 0.0 { total } else { 1.0 };
    Some(Evaluation {
        samples,
        ewma_error: e_ewma / total,
        model_error: e_model / total,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ewma_follows_the_newest_windows() {
        let e = Ewma { alpha: 0.5 };
        assert_eq!(e.predict(&[]), 0.0);
        assert_eq!(e.predict(&[8.0]), 8.0);
        assert_eq!(e.predict(&[8.0, 0.0, 4.0]), 4.0);
    }

    #[test]
    fn the_model_learns_a_trend_the_ewma_lags() {
        // Names whose load grows by a tenth each window, at several levels: the EWMA
        // trails every one of them; the model learns the growth.
        let traces: Vec<Vec<f64>> = (1..=8)
            .map(|level| {
                (0..20)
                    .map(|w| f64::from(level) * 100.0 * 1.1f64.powi(w))
                    .collect()
            })
            .collect();
        let eval = evaluate(&traces, 0.6, Ewma::default()).unwrap();
        assert_eq!(eval.samples, 8 * 8);
        assert!(eval.model_error < eval.ewma_error / 5.0, "{eval:?}");
        assert!(eval.model_error < 0.01, "{eval:?}");
    }

    #[test]
    fn on_a_steady_load_both_are_right() {
        let traces: Vec<Vec<f64>> = (1..=5).map(|l| vec![f64::from(l) * 50.0; 12]).collect();
        let eval = evaluate(&traces, 0.5, Ewma::default()).unwrap();
        assert!(eval.ewma_error < 1e-9);
        assert!(eval.model_error < 0.01, "{eval:?}");
    }

    #[test]
    fn short_histories_fall_back_to_the_ewma() {
        let traces: Vec<Vec<f64>> = (1..=6).map(|l| vec![f64::from(l); 10]).collect();
        let model = Linear::fit(&traces, Ewma::default(), 0.01).unwrap();
        assert_eq!(
            model.predict(&[10.0, 20.0]),
            Ewma::default().predict(&[10.0, 20.0])
        );
        assert!(Linear::fit(&[vec![1.0, 2.0]], Ewma::default(), 0.01).is_none());
    }

    #[test]
    fn solve_finds_the_weights() {
        let mut a = [[0.0; FEATURES]; FEATURES];
        for (i, row) in a.iter_mut().enumerate() {
            row[i] = 2.0;
            row[(i + 1) % FEATURES] = 1.0;
        }
        let want = [1.0, -2.0, 3.0, 0.5, 4.0];
        let mut b = [0.0; FEATURES];
        for i in 0..FEATURES {
            b[i] = (0..FEATURES).map(|k| a[i][k] * want[k]).sum();
        }
        let x = solve(a, b).unwrap();
        for i in 0..FEATURES {
            assert!((x[i] - want[i]).abs() < 1e-9);
        }
    }
}

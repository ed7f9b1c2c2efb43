//! Statistics for evals: bootstrap confidence intervals that respect the two-level structure of
//! an eval (tasks, then repeated runs within a task), the paired difference between two
//! toolsets over the same tasks, and pass^k.
//!
//! Guarantees: everything is a pure function of its inputs and the seed (a SplitMix64 stream,
//! so results are reproducible across machines); percentiles use linear interpolation between
//! order statistics (NumPy's default); empty inputs give `None`, never NaN.

/// A deterministic pseudo-random stream (SplitMix64).
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by Lemire's multiply-shift (bias below 2^-32 for our sizes).
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// A point estimate with a 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Estimate {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
}

pub const DEFAULT_RESAMPLES: usize = 10_000;
pub const DEFAULT_SEED: u64 = 20_261_129;

/// The `q`-quantile (0..=1) of sorted values, interpolating linearly.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let position = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let below = position.floor() as usize;
    let above = position.ceil() as usize;
    let weight = position - below as f64;
    Some(sorted[below] + (sorted[above] - sorted[below]) * weight)
}

fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Mean over tasks of each task's mean over its runs.
pub fn task_mean(tasks: &[Vec<f64>]) -> Option<f64> {
    let per_task: Vec<f64> = tasks.iter().filter_map(|runs| mean(runs)).collect();
    mean(&per_task)
}

/// One two-level resample: tasks with replacement, then runs within each drawn task.
fn resampled_task_mean(tasks: &[Vec<f64>], rng: &mut SplitMix64) -> f64 {
    let mut total = 0.0;
    for _ in 0..tasks.len() {
        let runs = &tasks[rng.below(tasks.len())];
        let mut sum = 0.0;
        for _ in 0..runs.len() {
            sum += runs[rng.below(runs.len())];
        }
        total += sum / runs.len() as f64;
    }
    total / tasks.len() as f64
}

fn interval(point: f64, mut draws: Vec<f64>) -> Option<Estimate> {
    draws.sort_by(f64::total_cmp);
    Some(Estimate {
        mean: point,
        low: quantile_sorted(&draws, 0.025)?,
        high: quantile_sorted(&draws, 0.975)?,
    })
}

/// Bootstrap 95% CI of the mean over tasks, resampling tasks and then runs within tasks.
/// `tasks[i]` holds task i's run values (1.0/0.0 for success, or token counts). Tasks with no
/// runs are ignored.
pub fn bootstrap_mean(tasks: &[Vec<f64>], resamples: usize, seed: u64) -> Option<Estimate> {
    let tasks: Vec<Vec<f64>> = tasks.iter().filter(|r| !r.is_empty()).cloned().collect();
    let point = task_mean(&tasks)?;
    let mut rng = SplitMix64::new(seed);
    let draws = (0..resamples.max(1))
        .map(|_| resampled_task_mean(&tasks, &mut rng))
        .collect();
    interval(point, draws)
}

/// Paired bootstrap 95% CI of mean(b) - mean(a) over the same tasks: each resample draws task
/// indices once and uses them for both sides, resampling runs within each side.
/// `a[i]` and `b[i]` must be the same task; pairs where either side has no runs are dropped.
pub fn paired_bootstrap_difference(
    a: &[Vec<f64>],
    b: &[Vec<f64>],
    resamples: usize,
    seed: u64,
) -> Option<Estimate> {
    let pairs: Vec<(&Vec<f64>, &Vec<f64>)> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| !x.is_empty() && !y.is_empty())
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let a_tasks: Vec<Vec<f64>> = pairs.iter().map(|(x, _)| (*x).clone()).collect();
    let b_tasks: Vec<Vec<f64>> = pairs.iter().map(|(_, y)| (*y).clone()).collect();
    let point = task_mean(&b_tasks)? - task_mean(&a_tasks)?;
    let mut rng = SplitMix64::new(seed);
    let mut draws = Vec::with_capacity(resamples.max(1));
    for _ in 0..resamples.max(1) {
        let mut diff = 0.0;
        for _ in 0..pairs.len() {
            let (x, y) = pairs[rng.below(pairs.len())];
            let mut sx = 0.0;
            for _ in 0..x.len() {
                sx += x[rng.below(x.len())];
            }
            let mut sy = 0.0;
            for _ in 0..y.len() {
                sy += y[rng.below(y.len())];
            }
            diff += sy / y.len() as f64 - sx / x.len() as f64;
        }
        draws.push(diff / pairs.len() as f64);
    }
    interval(point, draws)
}

/// n choose k as f64 (exact for the small n of an eval).
pub fn choose(n: usize, k: usize) -> f64 {
    if k > n {
        return 0.0;
    }
    let k = k.min(n - k);
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

/// pass^k as defined by tau-bench: the chance that k runs drawn without replacement from a
/// task's n runs all succeed, C(c, k) / C(n, k), averaged over tasks. Tasks with fewer than k
/// runs are skipped; `None` when none qualify.
pub fn pass_hat_k(successes_per_task: &[(usize, usize)], k: usize) -> Option<f64> {
    let values: Vec<f64> = successes_per_task
        .iter()
        .filter(|(n, _)| *n >= k && k > 0)
        .map(|(n, c)| choose(*c, k) / choose(*n, k))
        .collect();
    mean(&values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_numpy_linear_interpolation() {
        // numpy.quantile([1, 2, 3, 4], [0.025, 0.5, 0.975]) = [1.075, 2.5, 3.925]
        let sorted = [1.0, 2.0, 3.0, 4.0];
        let got: Vec<f64> = [0.025, 0.5, 0.975]
            .iter()
            .map(|q| quantile_sorted(&sorted, *q).unwrap())
            .collect();
        for (g, want) in got.iter().zip([1.075, 2.5, 3.925]) {
            assert!((g - want).abs() < 1e-12, "{g} vs {want}");
        }
        assert_eq!(quantile_sorted(&[], 0.5), None);
    }

    #[test]
    fn splitmix_matches_the_reference_stream() {
        // First outputs of SplitMix64 seeded with 0 (Vigna's reference implementation).
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next_u64(), 0x6E78_9E6A_A1B9_65F4);
    }

    #[test]
    fn pass_hat_k_hand_computed_cases() {
        let cases: Vec<(Vec<(usize, usize)>, usize, Option<f64>)> = vec![
            (vec![(3, 3)], 3, Some(1.0)),
            (vec![(3, 2)], 3, Some(0.0)),
            (vec![(4, 2)], 2, Some(1.0 / 6.0)),
            (vec![(3, 2)], 1, Some(2.0 / 3.0)),
            (vec![(3, 3), (3, 0)], 2, Some(0.5)),
            (vec![(5, 4), (5, 5)], 3, Some((4.0 / 10.0 + 1.0) / 2.0)),
            (vec![(2, 2)], 3, None),
        ];
        for (tasks, k, want) in cases {
            let got = pass_hat_k(&tasks, k);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "{tasks:?} k={k}: {g} vs {w}"),
                (g, w) => assert_eq!(g, w, "{tasks:?} k={k}"),
            }
        }
    }

    #[test]
    fn fixed_sample_and_seed_give_the_reference_interval() {
        // Reference values from an independent Python implementation of the same procedure
        // (SplitMix64 seed 42, 1,000 two-level resamples, linear-interpolation quantiles).
        let tasks: Vec<Vec<f64>> = [
            [1, 0, 1],
            [1, 1, 1],
            [0, 0, 1],
            [0, 0, 0],
            [1, 1, 0],
            [1, 0, 0],
            [1, 1, 1],
            [0, 1, 1],
        ]
        .iter()
        .map(|runs| runs.iter().map(|&r| f64::from(r)).collect())
        .collect();
        let e = bootstrap_mean(&tasks, 1000, 42).unwrap();
        for (got, want) in [
            (e.mean, 0.5833333333333334),
            (e.low, 0.29166666666666663),
            (e.high, 0.875),
        ] {
            assert!((got - want).abs() < 1e-12, "{e:?}");
        }
    }

    #[test]
    fn all_successes_give_a_degenerate_interval() {
        let tasks = vec![vec![1.0, 1.0, 1.0]; 20];
        let e = bootstrap_mean(&tasks, 2000, 7).unwrap();
        assert_eq!((e.mean, e.low, e.high), (1.0, 1.0, 1.0));
    }

    #[test]
    fn bootstrap_interval_agrees_with_the_normal_approximation() {
        // 40 tasks, one run each, 24 successes: p = 0.6, se = sqrt(p(1-p)/n) = 0.0775,
        // so the 95% interval is about 0.6 ± 0.152.
        let tasks: Vec<Vec<f64>> = (0..40)
            .map(|i| vec![if i < 24 { 1.0 } else { 0.0 }])
            .collect();
        let e = bootstrap_mean(&tasks, DEFAULT_RESAMPLES, DEFAULT_SEED).unwrap();
        assert!((e.mean - 0.6).abs() < 1e-12);
        assert!((e.low - 0.448).abs() < 0.03, "{e:?}");
        assert!((e.high - 0.752).abs() < 0.03, "{e:?}");
    }

    #[test]
    fn same_seed_same_interval_other_seed_nearly_the_same() {
        let tasks: Vec<Vec<f64>> = (0..20)
            .map(|i| vec![f64::from(i % 3 == 0), f64::from(i % 2 == 0), 1.0])
            .collect();
        let a = bootstrap_mean(&tasks, 5000, 1).unwrap();
        let b = bootstrap_mean(&tasks, 5000, 1).unwrap();
        let c = bootstrap_mean(&tasks, 5000, 2).unwrap();
        assert_eq!(a, b);
        assert!((a.low - c.low).abs() < 0.03 && (a.high - c.high).abs() < 0.03);
    }

    #[test]
    fn paired_difference_of_identical_sides_is_zero_and_a_uniform_gain_is_exact() {
        let a: Vec<Vec<f64>> = (0..10).map(|i| vec![f64::from(i % 2 == 0)]).collect();
        let same = paired_bootstrap_difference(&a, &a, 2000, 3).unwrap();
        assert_eq!((same.mean, same.low, same.high), (0.0, 0.0, 0.0));
        // b succeeds exactly where a fails and where a succeeds: +0.5 on every resample.
        let b: Vec<Vec<f64>> = vec![vec![1.0]; 10];
        let gain = paired_bootstrap_difference(&a, &b, 2000, 3).unwrap();
        assert!((gain.mean - 0.5).abs() < 1e-12);
        assert!(gain.low > 0.0 && gain.high <= 1.0);
    }

    #[test]
    fn paired_difference_is_tighter_than_unpaired_when_tasks_vary() {
        // Task difficulty varies a lot, the toolsets differ little: pairing removes the task
        // variance, so the paired interval is narrower than the difference of two intervals.
        let a: Vec<Vec<f64>> = (0..30)
            .map(|i| vec![if i < 15 { 1.0 } else { 0.0 }; 3])
            .collect();
        let mut b = a.clone();
        b[20] = vec![1.0; 3];
        let paired = paired_bootstrap_difference(&a, &b, 4000, 5).unwrap();
        let ea = bootstrap_mean(&a, 4000, 5).unwrap();
        let eb = bootstrap_mean(&b, 4000, 5).unwrap();
        assert!((paired.high - paired.low) < ((ea.high - ea.low) + (eb.high - eb.low)) / 2.0);
        assert!((paired.mean - 1.0 / 30.0).abs() < 1e-12);
    }

    #[test]
    fn empty_inputs_are_none_not_nan() {
        assert_eq!(bootstrap_mean(&[], 100, 1), None);
        assert_eq!(bootstrap_mean(&[vec![]], 100, 1), None);
        assert_eq!(paired_bootstrap_difference(&[], &[], 100, 1), None);
    }
}

//! `shmlink_http_request_duration_seconds`: a histogram whose buckets are
//! counted by the HTTP servers themselves (the front's engine in this
//! process, or each worker's in its slot of the counters page) and summed
//! by the pool's status, so it is one histogram in both HTTP modes. The
//! `prometheus` crate's `Histogram` only observes; this builds the family
//! its encoder writes from those counts.

use prometheus::proto::{Bucket, Histogram, Metric, MetricFamily, MetricType};
use shmlink_http::{Durations, DURATION_BOUNDS_US};

/// The family, from the summed counts.
pub(crate) fn family(d: &Durations) -> MetricFamily {
    let mut cumulative = 0u64;
    let buckets = DURATION_BOUNDS_US
        .iter()
        .zip(d.buckets)
        .map(|(&bound, n)| {
            cumulative = cumulative.wrapping_add(n);
            let mut b = Bucket::default();
            b.set_upper_bound(bound as f64 / 1e6);
            b.set_cumulative_count(cumulative);
            b
        })
        .collect();
    let mut h = Histogram::default();
    h.set_bucket(buckets);
    h.set_sample_count(d.count);
    h.set_sample_sum(d.sum_us as f64 / 1e6);
    let mut m = Metric::default();
    m.set_histogram(h);
    let mut f = MetricFamily::default();
    f.set_name("shmlink_http_request_duration_seconds".into());
    f.set_help(
        "Time of an HTTP request in the server that parsed it (the pool's front, or a worker \
         serving HTTP itself), from its head to its answer"
            .into(),
    );
    f.set_field_type(MetricType::HISTOGRAM);
    f.set_metric(vec![m]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_in_seconds() {
        let mut d = Durations::default();
        d.buckets[0] = 2;
        d.buckets[3] = 1;
        d.count = 4;
        d.sum_us = 3_000_000;
        let f = family(&d);
        let h = f.get_metric()[0].get_histogram();
        let b = h.get_bucket();
        assert_eq!(f.get_field_type(), MetricType::HISTOGRAM);
        assert_eq!(b.len(), DURATION_BOUNDS_US.len());
        assert_eq!((b[0].upper_bound(), b[0].cumulative_count()), (0.0005, 2));
        assert_eq!(b[2].cumulative_count(), 2);
        assert_eq!(b[3].cumulative_count(), 3);
        assert_eq!(
            b[11].cumulative_count(),
            3,
            "one slower than the last bound"
        );
        assert_eq!((h.get_sample_count(), h.get_sample_sum()), (4, 3.0));
    }
}

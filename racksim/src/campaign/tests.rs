use super::*;

#[test]
fn shards_cover_the_range_once() {
    let mut all: Vec<u64> = (0..3).flat_map(|i| shard_seeds((5, 104), (i, 3))).collect();
    all.sort();
    assert_eq!(all, (5..=104).collect::<Vec<_>>());
    assert_eq!(shard_seeds((1, 1), (0, 1)), vec![1]);
}

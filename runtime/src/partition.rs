//! How a table's rows are split across ranks, and the one mapping between a global id and its
//! (owner rank, local row).

use crate::error::ShardError;

/// How rows are assigned to ranks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PartitionScheme {
    /// Contiguous blocks of `ceil(N/W)` rows (dicee). Trailing ranks may get fewer rows, or none.
    Even,
    /// Contiguous blocks of the given per-rank row counts (WholeMemory's `embedding_entry_partition`).
    Explicit(Vec<usize>),
    /// Blocks of `block` consecutive rows dealt to ranks in turn (WholeMemory's `round_robin_size`):
    /// spreads skewed ids over ranks.
    RoundRobin {
        /// Rows per block (≥ 1).
        block: usize,
    },
}

impl PartitionScheme {
    /// The CLI name: `even`, `explicit`, `round-robin`.
    pub fn name(&self) -> &'static str {
        match self {
            PartitionScheme::Even => "even",
            PartitionScheme::Explicit(_) => "explicit",
            PartitionScheme::RoundRobin { .. } => "round-robin",
        }
    }
}

/// A partition of `rows` rows over `world` ranks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Partition {
    rows: usize,
    world: usize,
    scheme: PartitionScheme,
    /// First global row of each rank (contiguous schemes), length `world + 1`.
    starts: Vec<usize>,
}

impl Partition {
    /// Builds and checks a partition. Every `rows ≥ 1` and `world ≥ 1` works; ranks may own no
    /// rows.
    pub fn new(rows: usize, world: usize, scheme: PartitionScheme) -> Result<Self, ShardError> {
        let bad = |why: String| Err(ShardError::InvalidPartition(why));
        if rows == 0 {
            return bad("a table needs at least one row".into());
        }
        if world == 0 {
            return bad("the world needs at least one rank".into());
        }
        if rows > u32::MAX as usize {
            return bad(format!("{rows} rows exceed the u32 id space"));
        }
        let starts = match &scheme {
            PartitionScheme::Even => {
                let chunk = rows.div_ceil(world);
                (0..=world).map(|r| (r * chunk).min(rows)).collect()
            }
            PartitionScheme::Explicit(counts) => {
                if counts.len() != world {
                    return bad(format!("{} row counts for {world} ranks", counts.len()));
                }
                let total: usize = counts.iter().sum();
                if total != rows {
                    return bad(format!(
                        "row counts sum to {total}, the table has {rows} rows"
                    ));
                }
                std::iter::once(0)
                    .chain(
                        counts
                            .iter()
                            .scan(0, |s, &c| Some(*s + c).inspect(|&v| *s = v)),
                    )
                    .collect()
            }
            PartitionScheme::RoundRobin { block } => {
                if *block == 0 {
                    return bad("round-robin blocks need at least one row".into());
                }
                Vec::new()
            }
        };
        Ok(Self {
            rows,
            world,
            scheme,
            starts,
        })
    }

    /// Rows in the whole table.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Ranks.
    pub fn world(&self) -> usize {
        self.world
    }

    /// The scheme.
    pub fn scheme(&self) -> &PartitionScheme {
        &self.scheme
    }

    /// `(owner rank, local row)` of global row `id`; the caller has checked `id < rows`.
    #[inline]
    pub fn locate(&self, id: u32) -> (usize, u32) {
        let id = id as usize;
        match self.scheme {
            PartitionScheme::RoundRobin { block } => {
                let k = id / block;
                (
                    k % self.world,
                    ((k / self.world) * block + id % block) as u32,
                )
            }
            PartitionScheme::Even => {
                let chunk = self.starts[1];
                let owner = id / chunk;
                (owner, (id - owner * chunk) as u32)
            }
            PartitionScheme::Explicit(_) => {
                // The last rank whose start is ≤ id and that owns rows.
                let owner = self.starts.partition_point(|&s| s <= id) - 1;
                (owner, (id - self.starts[owner]) as u32)
            }
        }
    }

    /// The global id of `rank`'s local row `local`.
    pub fn global(&self, rank: usize, local: usize) -> usize {
        match self.scheme {
            PartitionScheme::RoundRobin { block } => {
                ((local / block) * self.world + rank) * block + local % block
            }
            _ => self.starts[rank] + local,
        }
    }

    /// Rows `rank` owns.
    pub fn local_rows(&self, rank: usize) -> usize {
        match self.scheme {
            PartitionScheme::RoundRobin { block } => {
                let blocks = self.rows.div_ceil(block);
                // Blocks rank, rank + W, …; the table's last block may be short.
                let owned = if rank < blocks {
                    (blocks - 1 - rank) / self.world + 1
                } else {
                    0
                };
                let last_block = blocks - 1;
                let short = if rank < blocks && last_block % self.world == rank {
                    blocks * block - self.rows
                } else {
                    0
                };
                owned * block - short
            }
            _ => self.starts[rank + 1] - self.starts[rank],
        }
    }

    /// A stable digest of the partition, compared across ranks to detect mismatches.
    pub fn digest(&self) -> u64 {
        let mut h = crate::init::SplitMix64::new(self.rows as u64 ^ ((self.world as u64) << 40));
        let mut mix = |x: u64| {
            h = crate::init::SplitMix64::new(h.next_u64() ^ x);
        };
        match &self.scheme {
            PartitionScheme::Even => mix(1),
            PartitionScheme::Explicit(counts) => counts.iter().for_each(|&c| mix(c as u64 + 2)),
            PartitionScheme::RoundRobin { block } => mix(*block as u64 ^ (3 << 60)),
        }
        h.next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schemes(rows: usize, world: usize) -> Vec<PartitionScheme> {
        let mut explicit = vec![0; world];
        explicit[world - 1] = rows;
        vec![
            PartitionScheme::Even,
            PartitionScheme::Explicit(explicit),
            PartitionScheme::RoundRobin { block: 1 },
            PartitionScheme::RoundRobin { block: 3 },
        ]
    }

    /// Every id maps to exactly one (owner, local) pair and back, local rows are dense, and the
    /// per-rank counts add up: checked against a brute-force walk for many (N, W).
    #[test]
    fn locate_and_global_are_inverse_for_every_small_shape() {
        for rows in 1..40 {
            for world in 1..7 {
                for scheme in schemes(rows, world) {
                    let p = Partition::new(rows, world, scheme.clone()).unwrap();
                    let mut seen = vec![Vec::new(); world];
                    for id in 0..rows {
                        let (owner, local) = p.locate(id as u32);
                        assert_eq!(
                            p.global(owner, local as usize),
                            id,
                            "{rows} {world} {scheme:?}"
                        );
                        seen[owner].push(local as usize);
                    }
                    for (rank, locals) in seen.iter().enumerate() {
                        assert_eq!(
                            locals.len(),
                            p.local_rows(rank),
                            "{rows} {world} {scheme:?} rank {rank}"
                        );
                        let mut sorted = locals.clone();
                        sorted.sort();
                        assert_eq!(
                            sorted,
                            (0..locals.len()).collect::<Vec<_>>(),
                            "dense local rows"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn dicee_negative_shard_case_gives_empty_shards() {
        // dicee: ceil(5/4) = 2 rows per rank gives rank 3 a size of 5 - 6 = -1.
        let p = Partition::new(5, 4, PartitionScheme::Even).unwrap();
        assert_eq!(
            (0..4).map(|r| p.local_rows(r)).collect::<Vec<_>>(),
            vec![2, 2, 1, 0]
        );
        let p = Partition::new(2, 5, PartitionScheme::Even).unwrap();
        assert_eq!(
            (0..5).map(|r| p.local_rows(r)).collect::<Vec<_>>(),
            vec![1, 1, 0, 0, 0]
        );
    }

    #[test]
    fn bad_partitions_are_refused() {
        assert!(Partition::new(0, 2, PartitionScheme::Even).is_err());
        assert!(Partition::new(4, 0, PartitionScheme::Even).is_err());
        assert!(Partition::new(4, 2, PartitionScheme::Explicit(vec![1, 2])).is_err());
        assert!(Partition::new(4, 2, PartitionScheme::Explicit(vec![4])).is_err());
        assert!(Partition::new(4, 2, PartitionScheme::RoundRobin { block: 0 }).is_err());
        assert_ne!(
            Partition::new(8, 2, PartitionScheme::Even)
                .unwrap()
                .digest(),
            Partition::new(8, 2, PartitionScheme::RoundRobin { block: 4 })
                .unwrap()
                .digest()
        );
    }
}

//! A list of entity ids per query, stored flat: KvsAll's labels and evaluation's filters.

/// For each query `i`, the ids `ids[offsets[i]..offsets[i + 1]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdLists {
    offsets: Vec<u32>,
    ids: Vec<u32>,
}

impl Default for IdLists {
    fn default() -> Self {
        Self {
            offsets: vec![0],
            ids: Vec::new(),
        }
    }
}

impl IdLists {
    /// No lists.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one query's list.
    pub fn push(&mut self, ids: &[u32]) {
        self.ids.extend_from_slice(ids);
        self.offsets.push(self.ids.len() as u32);
    }

    /// From one list per query.
    pub fn from_lists<L: AsRef<[u32]>>(lists: &[L]) -> Self {
        let mut out = Self::new();
        for l in lists {
            out.push(l.as_ref());
        }
        out
    }

    /// How many queries.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are no queries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Query `i`'s ids.
    pub fn get(&self, i: usize) -> &[u32] {
        &self.ids[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// Every id of every list.
    pub fn all_ids(&self) -> &[u32] {
        &self.ids
    }

    /// Every list's distinct ids, ascending, as `(list, id)` pairs in list order.
    pub(crate) fn distinct(&self) -> (Vec<usize>, Vec<u32>) {
        let mut lists = Vec::with_capacity(self.ids.len());
        let mut ids = Vec::with_capacity(self.ids.len());
        let mut mine = Vec::new();
        for i in 0..self.len() {
            mine.clear();
            mine.extend_from_slice(self.get(i));
            mine.sort_unstable();
            mine.dedup();
            lists.extend(std::iter::repeat_n(i, mine.len()));
            ids.extend_from_slice(&mine);
        }
        (lists, ids)
    }

    /// As words, for a collective: `[queries, offsets…, ids…]`.
    pub(crate) fn encode(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(1 + self.offsets.len() + self.ids.len());
        out.push(self.len() as u32);
        out.extend_from_slice(&self.offsets);
        out.extend_from_slice(&self.ids);
        out
    }

    /// Appends lists encoded by [`IdLists::encode`].
    pub(crate) fn extend_encoded(&mut self, words: &[u32]) {
        let n = words[0] as usize;
        let offsets = &words[1..n + 2];
        let ids = &words[n + 2..];
        for i in 0..n {
            self.push(&ids[offsets[i] as usize..offsets[i + 1] as usize]);
        }
    }
}

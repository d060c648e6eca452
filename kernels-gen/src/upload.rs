//! Host buffers for uploads, recycled: a buffer handed to the runtime comes back to the pool
//! when the runtime has copied it into device memory, so a steady state of steps allocates (and
//! page-faults) nothing of batch size, whatever the process's allocator.

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use cubecl::bytes::{AccessError, AccessPolicy, AllocationController, AllocationProperty, Bytes};

/// A pool of byte buffers; cheap to clone (shared).
#[derive(Clone, Debug, Default)]
pub struct UploadPool {
    spare: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// Buffers the pool keeps at most; more are freed. A step of a sharded table has a few buffers per
/// rank in flight (requests, replies, gradient messages, uploads).
const KEEP: usize = 64;

/// An empty buffer with room for `capacity` bytes, taken from `spare`: the smallest that fits,
/// else any (grown), else a new one. Shared by the recycling pools.
pub fn take_best_fit(spare: &mut Vec<Vec<u8>>, capacity: usize) -> Vec<u8> {
    let mut v = match best_fit(spare, capacity) {
        Some(i) => spare.swap_remove(i),
        None => spare.pop().unwrap_or_default(),
    };
    v.clear();
    if v.capacity() < capacity {
        // A quarter more than asked: batches vary a little in size from step to step.
        v.reserve_exact(capacity + capacity / 4);
    }
    v
}

/// The place in `spare` of the smallest buffer with room for `capacity` bytes.
pub fn best_fit(spare: &[Vec<u8>], capacity: usize) -> Option<usize> {
    spare
        .iter()
        .enumerate()
        .filter(|(_, v)| v.capacity() >= capacity)
        .min_by_key(|(_, v)| v.capacity())
        .map(|(i, _)| i)
}

impl UploadPool {
    /// An empty buffer with room for `capacity` bytes: the smallest spare one that fits, or a
    /// new one.
    pub fn take(&self, capacity: usize) -> Vec<u8> {
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        take_best_fit(&mut spare, capacity)
    }

    /// Returns a buffer to the pool.
    pub fn give(&self, v: Vec<u8>) {
        if v.capacity() == 0 {
            return;
        }
        let mut spare = self.spare.lock().unwrap_or_else(|p| p.into_inner());
        if spare.len() >= KEEP {
            // Keep the largest buffers.
            if let Some((i, _)) = spare
                .iter()
                .enumerate()
                .min_by_key(|(_, s)| s.capacity())
                .filter(|(_, s)| s.capacity() < v.capacity())
            {
                spare[i] = v;
            }
            return;
        }
        spare.push(v);
    }

    /// Returns buffers to the pool.
    pub fn give_all(&self, buffers: impl IntoIterator<Item = Vec<u8>>) {
        for v in buffers {
            self.give(v);
        }
    }

    /// `data` as runtime bytes that return to this pool when the runtime drops them.
    pub fn bytes(&self, data: Vec<u8>) -> Bytes {
        self.bytes_from(data, 0)
    }

    /// `data[start..]` as runtime bytes (a message's payload after its header, say), without a
    /// copy; the whole buffer returns to this pool when the runtime drops them.
    ///
    /// # Panics
    /// If `start` is past the end of `data`.
    pub fn bytes_from(&self, data: Vec<u8>, start: usize) -> Bytes {
        let len = data.len() - start;
        let controller = Pooled {
            data,
            start,
            pool: self.clone(),
        };
        // SAFETY: the controller's memory is `data[start..]`: `len` initialised bytes.
        unsafe { Bytes::from_controller(Box::new(controller), len) }
    }

    /// A copy of `values` as runtime bytes from the pool.
    pub fn bytes_of<T: bytemuck::Pod>(&self, values: &[T]) -> Bytes {
        let mut v = self.take(std::mem::size_of_val(values));
        v.extend_from_slice(bytemuck::cast_slice(values));
        self.bytes(v)
    }
}

/// A pooled buffer lent to the runtime.
struct Pooled {
    data: Vec<u8>,
    /// Where the lent bytes start in `data`.
    start: usize,
    pool: UploadPool,
}

impl AllocationController for Pooled {
    fn alloc_align(&self) -> usize {
        // Allocations this large come 16-byte aligned from every allocator in use; say so only
        // when it is true.
        if self.data[self.start..].as_ptr().align_offset(16) == 0 {
            16
        } else {
            1
        }
    }

    fn property(&self) -> AllocationProperty {
        AllocationProperty::Other
    }

    unsafe fn memory_mut(
        &mut self,
        _policy: AccessPolicy,
    ) -> Result<&mut [MaybeUninit<u8>], AccessError> {
        let lent = &mut self.data[self.start..];
        // SAFETY: u8 and MaybeUninit<u8> have the same layout; the caller writes only
        // initialised bytes (the trait's contract).
        Ok(unsafe {
            std::slice::from_raw_parts_mut(lent.as_mut_ptr().cast::<MaybeUninit<u8>>(), lent.len())
        })
    }

    fn memory(&self, _policy: AccessPolicy) -> Result<&[MaybeUninit<u8>], AccessError> {
        let lent = &self.data[self.start..];
        // SAFETY: u8 and MaybeUninit<u8> have the same layout.
        Ok(unsafe {
            std::slice::from_raw_parts(lent.as_ptr().cast::<MaybeUninit<u8>>(), lent.len())
        })
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.data));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_bytes_are_dropped() {
        let pool = UploadPool::default();
        let bytes = pool.bytes_of(&[1u32, 2, 3]);
        assert_eq!(&bytes[..], bytemuck::cast_slice::<u32, u8>(&[1, 2, 3]));
        let address = bytes.as_ptr();
        drop(bytes);
        let again = pool.take(8);
        assert_eq!(again.as_ptr(), address, "the same buffer, reused");
        assert!(again.is_empty());
    }

    #[test]
    fn bytes_from_lend_the_tail_and_return_the_whole_buffer() {
        let pool = UploadPool::default();
        let mut v = pool.take(12);
        v.extend_from_slice(bytemuck::cast_slice(&[7u32, 8, 9]));
        let address = v.as_ptr();
        let bytes = pool.bytes_from(v, 4);
        assert_eq!(&bytes[..], bytemuck::cast_slice::<u32, u8>(&[8, 9]));
        drop(bytes);
        let again = pool.take(12);
        assert_eq!(again.as_ptr(), address, "the whole buffer came back");
    }
}

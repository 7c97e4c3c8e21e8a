//! Slots with a free list (API clients, TCP connections).

/// Slots with a free list: indices stay valid while their entry lives (epoll tokens, the
/// flow → owner map), and are reused afterwards.
pub(super) struct Slab<T> {
    /// The slots (None: free); indexed directly while one is serviced out of its slot.
    pub(super) items: Vec<Option<T>>,
    free: Vec<usize>,
    live: usize,
}

impl<T> Slab<T> {
    pub(super) fn new() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }
    pub(super) fn insert(&mut self, v: T) -> usize {
        self.live += 1;
        match self.free.pop() {
            Some(i) => {
                self.items[i] = Some(v);
                i
            }
            None => {
                self.items.push(Some(v));
                self.items.len() - 1
            }
        }
    }
    pub(super) fn remove(&mut self, i: usize) -> Option<T> {
        let v = self.items.get_mut(i)?.take()?;
        self.live -= 1;
        self.free.push(i);
        Some(v)
    }
    pub(super) fn get(&self, i: usize) -> Option<&T> {
        self.items.get(i)?.as_ref()
    }
    pub(super) fn get_mut(&mut self, i: usize) -> Option<&mut T> {
        self.items.get_mut(i)?.as_mut()
    }
    pub(super) fn at(&mut self, i: usize) -> &mut T {
        self.items[i].as_mut().expect("live slot")
    }
    pub(super) fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().flatten()
    }
    pub(super) fn len(&self) -> usize {
        self.live
    }
}

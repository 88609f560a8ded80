//! Property tests of the allocator's invariants (manager.md §Invariants 1–8 and 10).

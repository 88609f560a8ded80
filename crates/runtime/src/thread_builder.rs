//! `ThreadBuilder` and the thread-spawning strategies of `ThreadPoolBuilder::spawn_handler`
//! (rayon-core's `ThreadBuilder`, `ThreadSpawn`, `DefaultSpawn`, `CustomSpawn`).
//!
//! The pool hands one `ThreadBuilder` per worker to its spawn strategy; whatever thread calls
//! [`ThreadBuilder::run`] becomes that worker. `ThreadSpawn` is public only so that it can bound
//! `ThreadPoolBuilder<S>`: it lives in a private module, so no other crate can name or
//! implement it (the same sealing rayon-core uses).

use std::fmt;
use std::io;
use std::thread;

/// A worker thread to be started by a custom spawn handler
/// ([`ThreadPoolBuilder::spawn_handler`](crate::ThreadPoolBuilder::spawn_handler)).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new()
///     .num_threads(2)
///     .spawn_handler(|thread| {
///         assert!(thread.index() < 2);
///         std::thread::spawn(|| thread.run());
///         Ok(())
///     })
///     .build()
///     .unwrap();
/// assert_eq!(pool.install(|| 6 * 7), 42);
/// ```
pub struct ThreadBuilder {
    name: Option<String>,
    stack_size: Option<usize>,
    index: usize,
    pool_id: usize,
    /// The worker's main loop (owns the worker's deque and a handle on the pool).
    main: Box<dyn FnOnce() + Send>,
}

impl ThreadBuilder {
    /// `main` is the worker's main loop; `pool_id` only shows in `Debug`.
    pub(crate) fn new(
        index: usize,
        pool_id: usize,
        name: Option<String>,
        stack_size: Option<usize>,
        main: impl FnOnce() + Send + 'static,
    ) -> Self {
        ThreadBuilder {
            name,
            stack_size,
            index,
            pool_id,
            main: Box::new(main),
        }
    }

    /// The index of this thread in the pool, within `0..num_threads`.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The name given by `ThreadPoolBuilder::thread_name` for this index, if any.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new()
    ///     .num_threads(1)
    ///     .thread_name(|i| format!("w{i}"))
    ///     .spawn_handler(|t| {
    ///         assert_eq!(t.name(), Some("w0"));
    ///         std::thread::spawn(|| t.run());
    ///         Ok(())
    ///     })
    ///     .build()
    ///     .unwrap();
    /// # drop(pool);
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The stack size given by `ThreadPoolBuilder::stack_size`, if any.
    pub fn stack_size(&self) -> Option<usize> {
        self.stack_size
    }

    /// Runs this worker's main loop on the current thread; returns once the pool has
    /// terminated (every handle dropped and every spawned task run).
    pub fn run(self) {
        (self.main)()
    }
}

impl fmt::Debug for ThreadBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadBuilder")
            .field("pool", &PoolId(self.pool_id))
            .field("index", &self.index)
            .field("name", &self.name)
            .field("stack_size", &self.stack_size)
            .finish()
    }
}

/// A pool's identity in `Debug` output, printed as rayon-core prints its `RegistryId`.
#[derive(Clone, Copy)]
pub(crate) struct PoolId(pub(crate) usize);

impl fmt::Debug for PoolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryId").field("addr", &self.0).finish()
    }
}

/// How a pool starts its worker threads. Sealed: implemented by [`DefaultSpawn`] and
/// [`CustomSpawn`] only.
pub trait ThreadSpawn {
    /// Start a thread with `thread`'s name and stack size that calls `thread.run()`.
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()>;
}

/// The default strategy: `std::thread::Builder` with the configured name and stack size.
#[derive(Debug, Default)]
pub struct DefaultSpawn;

impl ThreadSpawn for DefaultSpawn {
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()> {
        let mut b = thread::Builder::new();
        if let Some(name) = thread.name() {
            b = b.name(name.to_owned());
        }
        if let Some(stack_size) = thread.stack_size() {
            b = b.stack_size(stack_size);
        }
        b.spawn(|| thread.run())?;
        Ok(())
    }
}

/// A user-given spawn function (`ThreadPoolBuilder::spawn_handler`).
pub struct CustomSpawn<F>(F);

impl<F> CustomSpawn<F>
where
    F: FnMut(ThreadBuilder) -> io::Result<()>,
{
    pub(crate) fn new(spawn: F) -> Self {
        CustomSpawn(spawn)
    }
}

impl<F> ThreadSpawn for CustomSpawn<F>
where
    F: FnMut(ThreadBuilder) -> io::Result<()>,
{
    #[inline]
    fn spawn(&mut self, thread: ThreadBuilder) -> io::Result<()> {
        (self.0)(thread)
    }
}

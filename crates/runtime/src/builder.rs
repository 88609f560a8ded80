//! `ThreadPoolBuilder`: configuration of a pool (rayon-core's options plus process control).

use std::any::Any;
use std::error::Error;
use std::fmt;
use std::io;

use crate::control::ProcessControl;
use crate::ready::{Policies, DEFAULT_POLICIES};
use crate::registry;
use crate::thread_pool::ThreadPool;
use partita_queues::{ConfigError, DequeuePolicy, EnqueuePolicy};

type PanicHandler = dyn Fn(Box<dyn Any + Send>) + Send + Sync;
type ThreadHandler = dyn Fn(usize) + Send + Sync;

/// Configures and builds a [`ThreadPool`] (or the global pool).
///
/// ```
/// let pool = partita_runtime::ThreadPoolBuilder::new()
///     .num_threads(2)
///     .thread_name(|i| format!("worker-{i}"))
///     .build()
///     .unwrap();
/// let name = pool.install(|| std::thread::current().name().map(str::to_owned));
/// assert!(name.unwrap().starts_with("worker-"));
/// ```
#[derive(Default)]
pub struct ThreadPoolBuilder {
    num_threads: usize,
    pub(crate) use_current_thread: bool,
    pub(crate) panic_handler: Option<Box<PanicHandler>>,
    get_thread_name: Option<Box<dyn FnMut(usize) -> String>>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) start_handler: Option<Box<ThreadHandler>>,
    pub(crate) exit_handler: Option<Box<ThreadHandler>>,
    pub(crate) breadth_first: bool,
    pub(crate) process_control: ProcessControl,
    ready_queues: Option<Policies>,
    pub(crate) numa_follow: Option<bool>,
}

impl ThreadPoolBuilder {
    /// A builder with the default configuration.
    ///
    /// ```
    /// let b = partita_runtime::ThreadPoolBuilder::new();
    /// let _ = b;
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a new pool.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().build().unwrap();
    /// assert!(pool.current_num_threads() >= 1);
    /// ```
    pub fn build(self) -> Result<ThreadPool, ThreadPoolBuildError> {
        ThreadPool::build(self)
    }

    /// Builds the global pool used by `join`, `scope`, `spawn`… outside any pool. Fails if
    /// the global pool already exists (it is created on first use).
    ///
    /// ```
    /// // The global pool is created on first use; a second build_global fails.
    /// let _ = partita_runtime::ThreadPoolBuilder::new().build_global();
    /// assert!(partita_runtime::ThreadPoolBuilder::new().build_global().is_err());
    /// ```
    pub fn build_global(self) -> Result<(), ThreadPoolBuildError> {
        let registry = registry::init_global_registry(self)?;
        registry.wait_until_primed();
        Ok(())
    }

    /// The number of threads: the value given, else `RAYON_NUM_THREADS` (for drop-in
    /// compatibility with rayon-core), else the number of available CPUs.
    pub(crate) fn get_num_threads(&self) -> usize {
        if self.num_threads > 0 {
            return self.num_threads;
        }
        let from_env = std::env::var("RAYON_NUM_THREADS")
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&n| n > 0);
        from_env.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
    }

    pub(crate) fn get_thread_name(&mut self, index: usize) -> Option<String> {
        self.get_thread_name.as_mut().map(|f| f(index))
    }

    /// The name the pool registers under with a manager: the program's file name.
    pub(crate) fn manager_name(&self) -> String {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.file_name().map(|s| s.to_string_lossy().into_owned()))
            .unwrap_or_else(|| "partita-app".to_owned())
    }

    /// Names worker threads with `closure(index)`.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(1)
    ///     .thread_name(|i| format!("w{i}")).build().unwrap();
    /// assert_eq!(pool.install(|| std::thread::current().name().unwrap().to_owned()), "w0");
    /// ```
    pub fn thread_name<F>(mut self, closure: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.get_thread_name = Some(Box::new(closure));
        self
    }

    /// The number of worker threads; 0 (the default) means `RAYON_NUM_THREADS` or the
    /// number of CPUs.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(3).build().unwrap();
    /// assert_eq!(pool.current_num_threads(), 3);
    /// ```
    pub fn num_threads(mut self, num_threads: usize) -> Self {
        self.num_threads = num_threads;
        self
    }

    /// Makes the building thread worker 0 of the pool: it does not run the workers' main loop,
    /// but runs pool tasks whenever it waits inside the pool. It is never suspended by process
    /// control, and a target of 1 keeps worker 1 active as well (so that some thread always
    /// runs the pool's tasks). Building fails if the thread already belongs to a pool.
    ///
    /// ```
    /// std::thread::spawn(|| {
    ///     let pool = partita_runtime::ThreadPoolBuilder::new().num_threads(2)
    ///         .use_current_thread().build().unwrap();
    ///     assert_eq!(pool.current_thread_index(), Some(0));
    /// }).join().unwrap();
    /// ```
    pub fn use_current_thread(mut self) -> Self {
        self.use_current_thread = true;
        self
    }

    /// Called with the payload of a panic in a `spawn`ed task (without it such a panic aborts
    /// the process).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new()
    ///     .panic_handler(|p| eprintln!("task panicked: {:?}", p.downcast_ref::<&str>()))
    ///     .build().unwrap();
    /// # drop(pool);
    /// ```
    pub fn panic_handler<H>(mut self, panic_handler: H) -> Self
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.panic_handler = Some(Box::new(panic_handler));
        self
    }

    /// The stack size of worker threads.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().stack_size(4 << 20).build().unwrap();
    /// # drop(pool);
    /// ```
    pub fn stack_size(mut self, stack_size: usize) -> Self {
        self.stack_size = Some(stack_size);
        self
    }

    /// Workers take their own tasks FIFO instead of LIFO (rayon-core's `breadth_first`;
    /// usually slower, kept for compatibility).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().breadth_first().build().unwrap();
    /// # drop(pool);
    /// ```
    pub fn breadth_first(mut self) -> Self {
        self.breadth_first = true;
        self
    }

    /// Called by each worker thread (with its index) when it starts.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new()
    ///     .start_handler(|i| println!("worker {i} started")).build().unwrap();
    /// # drop(pool);
    /// ```
    pub fn start_handler<H>(mut self, start_handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.start_handler = Some(Box::new(start_handler));
        self
    }

    /// Called by each worker thread (with its index) when it exits.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new()
    ///     .exit_handler(|i| println!("worker {i} exiting")).build().unwrap();
    /// # drop(pool);
    /// ```
    pub fn exit_handler<H>(mut self, exit_handler: H) -> Self
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.exit_handler = Some(Box::new(exit_handler));
        self
    }

    /// Who decides the number of active workers (default: [`ProcessControl::Manager`]).
    ///
    /// ```
    /// use partita_runtime::{ProcessControl, ThreadPoolBuilder};
    /// let pool = ThreadPoolBuilder::new().process_control(ProcessControl::Standalone)
    ///     .num_threads(2).build().unwrap();
    /// pool.set_target_workers(1); // ignored in Standalone mode
    /// assert_eq!(pool.target_workers(), 2);
    /// ```
    pub fn process_control(mut self, mode: ProcessControl) -> Self {
        self.process_control = mode;
        self
    }

    /// Which partita-queues policies carry tasks injected from outside the pool and tasks
    /// handed over by workers that suspend. Default: `Sequential` / `Sequential` (valid for
    /// every pool size; see docs/bench/runtime.md). An incompatible pair (Table 3 of
    /// DiBella et al.), a policy with a secondary queue in a 1-worker pool, or the `Static`
    /// dequeue policy outside [`ProcessControl::Standalone`] (a suspended worker's queue would
    /// have no consumer) makes `build` fail with an error naming the rule. A 1-worker pool
    /// ignores the choice (one queue: every policy means the same).
    ///
    /// ```
    /// use partita_runtime::{DequeuePolicy, EnqueuePolicy, ThreadPoolBuilder};
    /// let pool = ThreadPoolBuilder::new().num_threads(2)
    ///     .ready_queues(EnqueuePolicy::PrimaryRandom, DequeuePolicy::PrimarySequential)
    ///     .build().unwrap();
    /// assert_eq!(pool.install(|| 1 + 1), 2);
    /// let err = ThreadPoolBuilder::new().num_threads(2)
    ///     .ready_queues(EnqueuePolicy::Global, DequeuePolicy::Sequential)
    ///     .build().unwrap_err();
    /// assert!(err.to_string().contains("Table 3"));
    /// ```
    pub fn ready_queues(mut self, enqueue: EnqueuePolicy, dequeue: DequeuePolicy) -> Self {
        self.ready_queues = Some(Policies { enqueue, dequeue });
        self
    }

    /// Whether memory registered with the pool (`ThreadPool::node_vec`) follows its CPUs to
    /// another NUMA node when the manager moves them (default: yes; a background thread
    /// moves it, never a worker).
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().numa_follow(false).build().unwrap();
    /// assert!(!pool.numa_report().follow);
    /// ```
    pub fn numa_follow(mut self, follow: bool) -> Self {
        self.numa_follow = Some(follow);
        self
    }

    /// The policies for a pool of `n` workers. A 1-worker pool has one queue, where every
    /// policy means the same thing, so it uses `Static`/`Static` (the only pair that has no
    /// secondary queue).
    pub(crate) fn policies_for(&self, n: usize) -> Policies {
        if n == 1 {
            return Policies {
                enqueue: EnqueuePolicy::Static,
                dequeue: DequeuePolicy::Static,
            };
        }
        self.ready_queues.unwrap_or(DEFAULT_POLICIES)
    }
}

impl fmt::Debug for ThreadPoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadPoolBuilder")
            .field("num_threads", &self.num_threads)
            .field("use_current_thread", &self.use_current_thread)
            .field("stack_size", &self.stack_size)
            .field("breadth_first", &self.breadth_first)
            .field("process_control", &self.process_control)
            .finish_non_exhaustive()
    }
}

/// Why a pool could not be built.
///
/// ```
/// let _ = partita_runtime::ThreadPoolBuilder::new().build_global();
/// let err = partita_runtime::ThreadPoolBuilder::new().build_global().unwrap_err();
/// assert!(err.to_string().contains("already been initialized"));
/// ```
#[derive(Debug)]
pub struct ThreadPoolBuildError {
    kind: ErrorKind,
}

#[derive(Debug)]
pub(crate) enum ErrorKind {
    GlobalPoolAlreadyInitialized,
    CurrentThreadAlreadyInPool,
    IOError(io::Error),
    ReadyQueues(ConfigError),
    StaticNeedsStandalone,
}

impl ThreadPoolBuildError {
    pub(crate) fn new(kind: ErrorKind) -> Self {
        ThreadPoolBuildError { kind }
    }
}

impl fmt::Display for ThreadPoolBuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::GlobalPoolAlreadyInitialized => {
                f.write_str("The global thread pool has already been initialized.")
            }
            ErrorKind::CurrentThreadAlreadyInPool => {
                f.write_str("The current thread is already part of another thread pool.")
            }
            ErrorKind::IOError(e) => write!(f, "could not spawn a worker thread: {e}"),
            ErrorKind::ReadyQueues(e) => write!(f, "ready_queues: {e}"),
            ErrorKind::StaticNeedsStandalone => f.write_str(
                "ready_queues: the Static dequeue policy needs ProcessControl::Standalone \
                 (a suspended worker's queue would have no consumer)",
            ),
        }
    }
}

impl Error for ThreadPoolBuildError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match &self.kind {
            ErrorKind::IOError(e) => Some(e),
            ErrorKind::ReadyQueues(e) => Some(e),
            _ => None,
        }
    }
}

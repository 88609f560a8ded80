//! `ThreadPoolBuilder`: configuration of a pool (rayon-core's options plus process control).

use std::any::Any;
use std::fmt;
use std::io;
use std::time::Duration;

pub(crate) use crate::build_error::ErrorKind;
pub use crate::build_error::ThreadPoolBuildError;
use crate::control::ProcessControl;
use crate::ready::{Policies, DEFAULT_POLICIES};
use crate::registry;
use crate::thread_builder::{CustomSpawn, DefaultSpawn, ThreadBuilder, ThreadSpawn};
use crate::thread_pool::ThreadPool;
use partita_queues::{DequeuePolicy, EnqueuePolicy};

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
///
/// `S` is how worker threads are started: [`ThreadPoolBuilder::spawn_handler`] changes it.
pub struct ThreadPoolBuilder<S = DefaultSpawn> {
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
    pub(crate) spawn_handler: S,
    pub(crate) numa_follow: Option<bool>,
    heartbeat: Option<Option<Duration>>,
}

// Not derived: the derive would ask for `S: Default` and leave `S` ambiguous in `new()`.
impl Default for ThreadPoolBuilder {
    fn default() -> Self {
        ThreadPoolBuilder {
            num_threads: 0,
            use_current_thread: false,
            panic_handler: None,
            get_thread_name: None,
            stack_size: None,
            start_handler: None,
            exit_handler: None,
            breadth_first: false,
            process_control: ProcessControl::default(),
            ready_queues: None,
            spawn_handler: DefaultSpawn,
            numa_follow: None,
            heartbeat: None,
        }
    }
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

    /// Builds a pool whose workers are scoped threads of [`std::thread::scope`], runs
    /// `with_pool` on it, and returns its result once every worker has exited. Each worker
    /// thread calls `wrapper(thread)`, which must call [`ThreadBuilder::run`] (for instance
    /// inside a scoped thread-local). The pool is dropped when `with_pool` returns.
    ///
    /// ```
    /// let data = vec![1, 2, 3];
    /// let sum = partita_runtime::ThreadPoolBuilder::new()
    ///     .num_threads(2)
    ///     .build_scoped(
    ///         |thread| thread.run(),
    ///         |pool| pool.install(|| data.iter().sum::<i32>()),
    ///     )
    ///     .unwrap();
    /// assert_eq!(sum, 6);
    /// ```
    pub fn build_scoped<W, F, R>(self, wrapper: W, with_pool: F) -> Result<R, ThreadPoolBuildError>
    where
        W: Fn(ThreadBuilder) + Sync, // expected to call `run()`
        F: FnOnce(&ThreadPool) -> R,
    {
        std::thread::scope(|scope| {
            let pool = self
                .spawn_handler(|thread| {
                    let mut builder = std::thread::Builder::new();
                    if let Some(name) = thread.name() {
                        builder = builder.name(name.to_string());
                    }
                    if let Some(size) = thread.stack_size() {
                        builder = builder.stack_size(size);
                    }
                    builder.spawn_scoped(scope, || wrapper(thread))?;
                    Ok(())
                })
                .build()?;
            Ok(with_pool(&pool))
        })
    }
}

impl<S: ThreadSpawn> ThreadPoolBuilder<S> {
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
}

impl<S> ThreadPoolBuilder<S> {
    /// Starts worker threads with `spawn` instead of `std::thread::spawn`: it receives one
    /// [`ThreadBuilder`] per worker (except worker 0 with `use_current_thread`) and must
    /// arrange for `run()` to be called on a new thread. An error it returns makes `build`
    /// fail with that error (the workers already started then exit). Workers run until the
    /// pool terminates: threads of a `std::thread::scope` are joined only after that.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new()
    ///     .num_threads(2)
    ///     .spawn_handler(|thread| {
    ///         let mut b = std::thread::Builder::new();
    ///         if let Some(name) = thread.name() {
    ///             b = b.name(name.to_owned());
    ///         }
    ///         b.spawn(|| thread.run())?;
    ///         Ok(())
    ///     })
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(pool.install(|| 1 + 1), 2);
    /// ```
    pub fn spawn_handler<F>(self, spawn: F) -> ThreadPoolBuilder<CustomSpawn<F>>
    where
        F: FnMut(ThreadBuilder) -> io::Result<()>,
    {
        ThreadPoolBuilder {
            spawn_handler: CustomSpawn::new(spawn),
            num_threads: self.num_threads,
            use_current_thread: self.use_current_thread,
            panic_handler: self.panic_handler,
            get_thread_name: self.get_thread_name,
            stack_size: self.stack_size,
            start_handler: self.start_handler,
            exit_handler: self.exit_handler,
            breadth_first: self.breadth_first,
            process_control: self.process_control,
            ready_queues: self.ready_queues,
            numa_follow: self.numa_follow,
            heartbeat: self.heartbeat,
        }
    }

    /// The number of threads: the value given, else `RAYON_NUM_THREADS`, else the deprecated
    /// `RAYON_RS_NUM_CPUS`, else the number of available CPUs — rayon-core's rules, including
    /// that `RAYON_NUM_THREADS=0` means "the number of CPUs" while an unparsable value falls
    /// through to `RAYON_RS_NUM_CPUS`.
    pub(crate) fn get_num_threads(&self) -> usize {
        if self.num_threads > 0 {
            return self.num_threads;
        }
        let cpus = || {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        };
        let var = |key| {
            std::env::var(key)
                .ok()
                .and_then(|s| s.parse::<usize>().ok())
        };
        match var("RAYON_NUM_THREADS") {
            Some(n @ 1..) => return n,
            Some(0) => return cpus(),
            None => {}
        }
        match var("RAYON_RS_NUM_CPUS") {
            Some(n @ 1..) => n,
            _ => cpus(),
        }
    }

    /// The heartbeat interval the pool uses (`heartbeat_interval`, else the environment).
    pub(crate) fn heartbeat_interval_of(&self) -> Result<Option<Duration>, ThreadPoolBuildError> {
        if let Some(Some(d)) = self.heartbeat {
            crate::join::heartbeat::check_interval(d)
                .map_err(|why| ThreadPoolBuildError::new(ErrorKind::HeartbeatInterval(why)))?;
        }
        Ok(crate::join::heartbeat::resolve(self.heartbeat))
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
    /// usually slower, kept for compatibility and deprecated as there).
    ///
    /// ```
    /// #[allow(deprecated)]
    /// let pool = partita_runtime::ThreadPoolBuilder::new().breadth_first().build().unwrap();
    /// # drop(pool);
    /// ```
    #[deprecated(note = "use `scope_fifo` and `spawn_fifo` for similar effect")]
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
    /// moves it, never a worker). The portable build (not Linux) has no NUMA placement: this
    /// setting changes nothing there.
    ///
    /// ```
    /// let pool = partita_runtime::ThreadPoolBuilder::new().numa_follow(false).build().unwrap();
    /// # #[cfg(partita_linux)]
    /// assert!(!pool.numa_report().follow);
    /// ```
    pub fn numa_follow(mut self, follow: bool) -> Self {
        self.numa_follow = Some(follow);
        self
    }

    /// How often each worker offers one of its pending `join` halves to thieves: every
    /// `interval` of busy time (heartbeat scheduling; `join/README.md`), or, with `None`,
    /// at every `join` (rayon-core's behaviour). Default: `PARTITA_HEARTBEAT_US` (microseconds,
    /// `on` for 100 µs, or `off`) if set and valid, else off: a first half that blocks outside
    /// the pool on its own pending second half deeper in a job would wait for a heartbeat its
    /// worker never reaches (`join/README.md` §5). An interval outside 1 µs to 100 ms makes
    /// `build` fail with an error naming the range. `breadth_first` pools always offer at
    /// once (their owner takes its oldest job first, which a local LIFO list cannot mimic).
    ///
    /// ```
    /// use std::time::Duration;
    /// use partita_runtime::ThreadPoolBuilder;
    /// let pool = ThreadPoolBuilder::new()
    ///     .heartbeat_interval(Some(Duration::from_micros(200))).build().unwrap();
    /// assert_eq!(pool.join(|| 1, || 2), (1, 2));
    /// let err = ThreadPoolBuilder::new().heartbeat_interval(Some(Duration::ZERO))
    ///     .build().unwrap_err();
    /// assert!(err.to_string().contains("heartbeat_interval"));
    /// ```
    pub fn heartbeat_interval(mut self, interval: Option<Duration>) -> Self {
        self.heartbeat = Some(interval);
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

/// Shows `Some(<closure>)` for a configured closure.
struct ClosurePlaceholder;

impl fmt::Debug for ClosurePlaceholder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<closure>")
    }
}

/// rayon-core's exact format (the process-control and ready-queue settings are left out so that
/// a program's output does not change when it moves to partita).
impl<S> fmt::Debug for ThreadPoolBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let closure = |present: bool| present.then_some(ClosurePlaceholder);
        f.debug_struct("ThreadPoolBuilder")
            .field("num_threads", &self.num_threads)
            .field("use_current_thread", &self.use_current_thread)
            .field("get_thread_name", &closure(self.get_thread_name.is_some()))
            .field("panic_handler", &closure(self.panic_handler.is_some()))
            .field("stack_size", &self.stack_size)
            .field("start_handler", &closure(self.start_handler.is_some()))
            .field("exit_handler", &closure(self.exit_handler.is_some()))
            .field("breadth_first", &self.breadth_first)
            .finish()
    }
}

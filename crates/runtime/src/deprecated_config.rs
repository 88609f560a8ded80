//! rayon-core's deprecated configuration API (`Configuration`, `initialize`,
//! `ThreadPool::new`), kept so that old code compiles unchanged: each is a thin wrapper over
//! `ThreadPoolBuilder` whose errors are boxed, exactly as in rayon-core 1.13.
#![allow(deprecated)]

use std::any::Any;
use std::error::Error;
use std::fmt;

use crate::builder::ThreadPoolBuilder;
use crate::thread_pool::ThreadPool;

/// The old name of the pool configuration. Use [`ThreadPoolBuilder`] instead.
///
/// ```
/// #![allow(deprecated)]
/// let pool = partita_runtime::Configuration::new().num_threads(2).build().unwrap();
/// assert_eq!(pool.current_num_threads(), 2);
/// ```
#[deprecated(note = "Use `ThreadPoolBuilder`")]
#[derive(Default)]
pub struct Configuration {
    builder: ThreadPoolBuilder,
}

impl Configuration {
    /// A configuration with the defaults of [`ThreadPoolBuilder::new`].
    pub fn new() -> Configuration {
        Configuration {
            builder: ThreadPoolBuilder::new(),
        }
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::build`].
    pub fn build(self) -> Result<ThreadPool, Box<dyn Error + 'static>> {
        self.builder.build().map_err(Box::from)
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::thread_name`].
    pub fn thread_name<F>(mut self, closure: F) -> Self
    where
        F: FnMut(usize) -> String + 'static,
    {
        self.builder = self.builder.thread_name(closure);
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::num_threads`].
    pub fn num_threads(mut self, num_threads: usize) -> Configuration {
        self.builder = self.builder.num_threads(num_threads);
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::panic_handler`].
    pub fn panic_handler<H>(mut self, panic_handler: H) -> Configuration
    where
        H: Fn(Box<dyn Any + Send>) + Send + Sync + 'static,
    {
        self.builder = self.builder.panic_handler(panic_handler);
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::stack_size`].
    pub fn stack_size(mut self, stack_size: usize) -> Self {
        self.builder = self.builder.stack_size(stack_size);
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::breadth_first`].
    pub fn breadth_first(mut self) -> Self {
        self.builder = self.builder.breadth_first();
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::start_handler`].
    pub fn start_handler<H>(mut self, start_handler: H) -> Configuration
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.builder = self.builder.start_handler(start_handler);
        self
    }

    /// Deprecated in favor of [`ThreadPoolBuilder::exit_handler`].
    pub fn exit_handler<H>(mut self, exit_handler: H) -> Configuration
    where
        H: Fn(usize) + Send + Sync + 'static,
    {
        self.builder = self.builder.exit_handler(exit_handler);
        self
    }
}

impl fmt::Debug for Configuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.builder.fmt(f)
    }
}

/// Deprecated in favor of [`ThreadPoolBuilder::build_global`]; fails the same way (for
/// instance when the global pool already exists).
///
/// ```
/// #![allow(deprecated)]
/// let _ = partita_runtime::ThreadPoolBuilder::new().build_global();
/// let err = partita_runtime::initialize(partita_runtime::Configuration::new()).unwrap_err();
/// assert_eq!(err.to_string(), "The global thread pool has already been initialized.");
/// ```
#[deprecated(note = "use `ThreadPoolBuilder::build_global`")]
pub fn initialize(config: Configuration) -> Result<(), Box<dyn Error>> {
    config.builder.build_global().map_err(Box::from)
}

impl ThreadPool {
    /// Deprecated in favor of [`ThreadPoolBuilder::build`].
    ///
    /// ```
    /// #![allow(deprecated)]
    /// use partita_runtime::{Configuration, ThreadPool};
    /// let pool = ThreadPool::new(Configuration::new().num_threads(3)).unwrap();
    /// assert_eq!(pool.current_num_threads(), 3);
    /// ```
    #[deprecated(note = "Use `ThreadPoolBuilder::build`")]
    pub fn new(configuration: Configuration) -> Result<ThreadPool, Box<dyn Error>> {
        configuration.builder.build().map_err(Box::from)
    }
}

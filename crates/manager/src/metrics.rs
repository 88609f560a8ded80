//! `partita serve --metrics ADDR`: `/metrics` in the Prometheus text format (0.0.4).
//!
//! Every value is taken at scrape time, under the registry's lock, from the same status
//! snapshot `partita status --json` prints plus the [`Telemetry`] the snapshot lacks, so a
//! scrape and a status taken at the same instant agree. The encoding is prometheus-client's;
//! the HTTP server is hyper's (HTTP/1.1, one request per connection).

use crate::status::Status;
use crate::telemetry::Telemetry;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

/// Why the metrics endpoint cannot be served.
///
/// ```
/// let e = partita_manager::metrics::check_addr("0.0.0.0:9464", false).unwrap_err();
/// assert!(e.to_string().contains("--metrics-public"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// Not `IP:PORT` (or `localhost:PORT`).
    #[error(
        "--metrics {0:?}: not an address; expected IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"
    )]
    BadAddress(String),
    /// A non-loopback address without `--metrics-public`.
    #[error(
        "--metrics {0}: not a loopback address; the endpoint has no authentication, so pass \
         --metrics-public to serve it on other interfaces"
    )]
    NotLoopback(SocketAddr),
    /// The address could not be bound (already in use, not local, no permission).
    #[error("--metrics {addr}: cannot listen: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Parse a `--metrics` address and check it: loopback only unless `public`.
///
/// ```
/// use partita_manager::metrics::check_addr;
/// assert_eq!(check_addr("localhost:0", false).unwrap().to_string(), "127.0.0.1:0");
/// assert!(check_addr("[::1]:9464", false).is_ok());
/// assert!(check_addr("0.0.0.0:9464", true).is_ok());
/// assert!(check_addr("127.0.0.1", false).is_err());
/// ```
pub fn check_addr(text: &str, public: bool) -> Result<SocketAddr, MetricsError> {
    let addr = match text.strip_prefix("localhost:") {
        Some(port) => port
            .parse::<u16>()
            .map(|p| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p))
            .map_err(|_| MetricsError::BadAddress(text.into()))?,
        None => text
            .parse::<SocketAddr>()
            .map_err(|_| MetricsError::BadAddress(text.into()))?,
    };
    if !public && !addr.ip().is_loopback() {
        return Err(MetricsError::NotLoopback(addr));
    }
    Ok(addr)
}

/// Check the address and bind it (before the daemon starts, so a bad address stops `serve`
/// with nothing to undo).
///
/// ```
/// let l = partita_manager::metrics::bind("127.0.0.1:0", false).unwrap();
/// let again = partita_manager::metrics::bind(&l.local_addr().unwrap().to_string(), false);
/// assert!(again.unwrap_err().to_string().contains("cannot listen"));
/// ```
pub fn bind(text: &str, public: bool) -> Result<TcpListener, MetricsError> {
    let addr = check_addr(text, public)?;
    let listener = TcpListener::bind(addr).map_err(|source| MetricsError::Bind { addr, source })?;
    listener
        .set_nonblocking(true)
        .map_err(|source| MetricsError::Bind { addr, source })?;
    Ok(listener)
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    partition: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AppLabels {
    app: String,
    id: u32,
    pid: i32,
    partition: String,
}

impl AppLabels {
    /// The labels of one application of a status snapshot.
    fn of(a: &crate::status::AppStatus) -> AppLabels {
        AppLabels {
            app: a.name.clone(),
            id: a.id,
            pid: a.pid,
            partition: a.partition.clone(),
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SourceLabels {
    partition: String,
    source: String,
}

/// Labels of an application's per-node series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NodeLabels {
    app: String,
    id: u32,
    pid: i32,
    node: u32,
}

/// A family of gauges registered under `name`.
fn gauges<L>(reg: &mut Registry, name: &str, help: &str) -> Family<L, Gauge>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let f = Family::<L, Gauge>::default();
    reg.register(name, help, f.clone());
    f
}

/// A family of counters registered under `name` (exposed as `name_total`).
fn counters<L>(reg: &mut Registry, name: &str, help: &str) -> Family<L, Counter>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    let f = Family::<L, Counter>::default();
    reg.register(name, help, f.clone());
    f
}

/// The Prometheus text of a status snapshot and the telemetry taken with it.
///
/// ```
/// let s = partita_manager::Status { cpus_managed: 4, ..Default::default() };
/// let t = partita_manager::telemetry::Telemetry::default();
/// let text = partita_manager::metrics::encode(&s, &t);
/// assert!(text.contains("partita_cpus_managed 4"));
/// ```
pub fn encode(status: &Status, telemetry: &Telemetry) -> String {
    let mut reg = Registry::with_prefix("partita");
    let single = |reg: &mut Registry, name: &str, help: &str, v: i64| {
        let g = Gauge::<i64>::default();
        g.set(v);
        reg.register(name, help, g);
    };
    single(
        &mut reg,
        "cpus_managed",
        "CPUs the manager hands out",
        status.cpus_managed as i64,
    );
    single(
        &mut reg,
        "applications",
        "Registered applications",
        status.applications.len() as i64,
    );
    let reallocations = Counter::<u64>::default();
    reallocations.inc_by(status.reallocations);
    reg.register("reallocations", "Reallocations since start", reallocations);
    reg.register(
        "reallocation_duration_seconds",
        "Time one reallocation is planned under the registry lock (applying follows outside it)",
        telemetry.reallocation_latency().clone(),
    );
    reg.register(
        "registration_refusals",
        "Registrations refused, by reason (the error code sent)",
        telemetry.refusals().clone(),
    );
    encode_partitions(&mut reg, status, telemetry);
    encode_apps(&mut reg, status, telemetry);
    encode_memory(&mut reg, status);
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &reg);
    text
}

fn encode_partitions(reg: &mut Registry, status: &Status, telemetry: &Telemetry) {
    let alloc = gauges(reg, "partition_allocated_cpus", "CPUs a partition has");
    let demand = gauges(
        reg,
        "partition_demand_cpus",
        "Sum of the partition's member demands",
    );
    let entitled = gauges(
        reg,
        "partition_entitlement_cpus",
        "CPUs a partition is entitled to",
    );
    let active = gauges(
        reg,
        "partition_active_workers",
        "Active workers of its applications",
    );
    let moves = counters(
        reg,
        "partition_cpu_moves",
        "CPUs given to its members that another member held",
    );
    let revoked = counters(
        reg,
        "partition_revocations",
        "CPUs taken from the partition while it still demanded them",
    );
    let source = gauges(
        reg,
        "counter_source",
        "1 for the memory-traffic counter source a partition uses",
    );
    for (k, p) in status.partitions.iter().enumerate() {
        let l = PartitionLabels {
            partition: p.name.clone(),
        };
        alloc.get_or_create(&l).set(i64::from(p.allocation));
        demand.get_or_create(&l).set(i64::from(p.demand));
        entitled.get_or_create(&l).set(i64::from(p.entitlement));
        let workers: u32 = status
            .applications
            .iter()
            .filter(|a| a.partition == p.name)
            .map(|a| a.active)
            .sum();
        active.get_or_create(&l).set(i64::from(workers));
        let churn = telemetry.partition(k);
        moves.get_or_create(&l).inc_by(churn.moves);
        revoked.get_or_create(&l).inc_by(churn.revocations);
        let s = if p.counter_source.is_empty() {
            "none".to_string()
        } else {
            p.counter_source.clone()
        };
        source
            .get_or_create(&SourceLabels {
                partition: p.name.clone(),
                source: s,
            })
            .set(1);
    }
}

fn encode_apps(reg: &mut Registry, status: &Status, telemetry: &Telemetry) {
    let alloc = gauges(
        reg,
        "app_allocated_cpus",
        "CPUs an application may use (its published target)",
    );
    let demand = gauges(reg, "app_demand_cpus", "Demand an application reports");
    let active = gauges(
        reg,
        "app_active_workers",
        "Active workers an application reports",
    );
    let moves = counters(
        reg,
        "app_cpu_moves",
        "CPUs given to the application that another member held",
    );
    let revoked = counters(
        reg,
        "app_revocations",
        "CPUs taken from the application while it still demanded them",
    );
    for a in &status.applications {
        let l = AppLabels::of(a);
        alloc.get_or_create(&l).set(i64::from(a.target));
        demand.get_or_create(&l).set(i64::from(a.demand));
        active.get_or_create(&l).set(i64::from(a.active));
        let churn = telemetry.app(a.id);
        moves.get_or_create(&l).inc_by(churn.moves);
        revoked.get_or_create(&l).inc_by(churn.revocations);
    }
}

/// The page mover's counters (memory follows CPUs) and, per application, the bytes moved
/// and its resident pages per node when the status has them.
fn encode_memory(reg: &mut Registry, status: &Status) {
    let m = &status.memory;
    for (name, help, v) in [
        (
            "numa_migration_calls",
            "System calls made on applications' memory (move_pages, numa_maps reads)",
            m.calls,
        ),
        (
            "numa_migrated_bytes",
            "Bytes of applications' memory moved after their CPUs",
            m.moved_bytes,
        ),
        (
            "numa_migrations",
            "Placements whose memory started to move",
            m.migrations,
        ),
        (
            "numa_migrations_deferred",
            "Placements the cost rule made wait",
            m.deferred,
        ),
        (
            "numa_migration_errors",
            "Failed calls of the page mover (EPERM, ENOMEM, ESRCH, ...)",
            m.errors,
        ),
    ] {
        let c = Counter::<u64>::default();
        c.inc_by(v);
        reg.register(name, help, c);
    }
    let moved = counters(
        reg,
        "app_memory_moved_bytes",
        "Bytes of the application's memory moved after its CPUs",
    );
    let pages = gauges(
        reg,
        "app_memory_pages",
        "Resident pages of the application per NUMA node",
    );
    for a in &status.applications {
        let l = AppLabels::of(a);
        moved.get_or_create(&l).inc_by(a.memory_moved_bytes);
        for (node, p) in &a.pages_per_node {
            let l = NodeLabels {
                app: a.name.clone(),
                id: a.id,
                pid: a.pid,
                node: *node,
            };
            pages.get_or_create(&l).set(*p as i64);
        }
    }
}

/// At most this many scrapes are served at once; more connections are closed at once.
const MAX_CONNECTIONS: usize = 16;
/// A connection that has not finished its request and response by then is closed.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);

/// The response to one request: `/metrics` from `scrape`, 404 elsewhere, 405 for methods
/// other than GET and HEAD.
fn respond(method: &Method, path: &str, scrape: impl FnOnce() -> String) -> Response<Full<Bytes>> {
    let (code, ctype, body) = match (method, path) {
        (&Method::GET | &Method::HEAD, "/metrics") => (
            StatusCode::OK,
            prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            scrape(),
        ),
        (&Method::GET | &Method::HEAD, _) => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "partita metrics: see /metrics\n".to_string(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain; charset=utf-8",
            "GET /metrics\n".to_string(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// Serve `/metrics` on `listener` until the runtime stops; logs the bound address as
/// `metrics listening on ADDR`. Must be called inside the daemon's tokio runtime.
pub(crate) fn spawn(
    listener: TcpListener,
    shared: Arc<crate::daemon::Shared>,
) -> Result<(), crate::Error> {
    let io = |source| crate::Error::Io {
        context: "metrics listener".into(),
        source,
    };
    let addr = listener.local_addr().map_err(io)?;
    let listener = tokio::net::TcpListener::from_std(listener).map_err(io)?;
    tracing::info!(%addr, "metrics listening on {addr}");
    tokio::spawn(accept_loop(listener, shared));
    Ok(())
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<crate::daemon::Shared>) {
    let limit = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "metrics: accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            continue; // Too many scrapes at once: drop this connection.
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let scrape = || {
                    // Status and telemetry under one lock: one consistent instant. The page
                    // mover's counters are atomics (no numa_maps reads per scrape).
                    let r = shared.lock();
                    let mut status = r.status(None);
                    crate::memfollow::annotate(&mut status, &shared.memfollow, false);
                    encode(&status, &r.telemetry)
                };
                let resp = respond(req.method(), req.uri().path(), scrape);
                std::future::ready(Ok::<_, std::convert::Infallible>(resp))
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .keep_alive(false)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = tokio::time::timeout(CONNECTION_TIMEOUT, conn)
                .await
                .unwrap_or(Ok(()))
            {
                tracing::debug!(error = %e, "metrics: connection failed");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{AppStatus, PartitionStatus};

    #[test]
    fn addresses_are_checked() {
        assert!(matches!(
            check_addr("10.1.2.3:80", false),
            Err(MetricsError::NotLoopback(_))
        ));
        assert!(matches!(
            check_addr("[::]:80", false),
            Err(MetricsError::NotLoopback(_))
        ));
        assert!(matches!(
            check_addr("nonsense", false),
            Err(MetricsError::BadAddress(_))
        ));
        assert!(matches!(
            check_addr("localhost:x", false),
            Err(MetricsError::BadAddress(_))
        ));
        assert!(check_addr("127.0.0.2:1", false).is_ok());
    }

    #[test]
    fn routes() {
        let ok = respond(&Method::GET, "/metrics", || "x 1\n".into());
        assert_eq!(ok.status(), StatusCode::OK);
        assert!(ok.headers()[CONTENT_TYPE]
            .to_str()
            .unwrap()
            .contains("0.0.4"));
        let missing = respond(&Method::GET, "/", || unreachable!("no scrape for /"));
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
        let post = respond(&Method::POST, "/metrics", || {
            unreachable!("no scrape for POST")
        });
        assert_eq!(post.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[test]
    fn encodes_every_family_from_the_snapshot() {
        let status = Status {
            cpus_managed: 8,
            reallocations: 5,
            partitions: vec![PartitionStatus {
                name: "default".into(),
                allocation: 6,
                demand: 7,
                counter_source: "none".into(),
                ..Default::default()
            }],
            applications: vec![AppStatus {
                id: 3,
                pid: 99,
                name: "a\"b".into(),
                partition: "default".into(),
                target: 6,
                demand: 7,
                active: 5,
                ..Default::default()
            }],
            ..Default::default()
        };
        let t = Telemetry::default();
        t.count_refusal::<()>(&Err((
            partita_protocol::wire::ErrorCode::Version,
            String::new(),
        )));
        let text = encode(&status, &t);
        for line in [
            "partita_cpus_managed 8",
            "partita_applications 1",
            "partita_reallocations_total 5",
            "partita_partition_allocated_cpus{partition=\"default\"} 6",
            "partita_partition_active_workers{partition=\"default\"} 5",
            "partita_app_allocated_cpus{app=\"a\\\"b\",id=\"3\",pid=\"99\",partition=\"default\"} 6",
            "partita_app_cpu_moves_total{app=\"a\\\"b\",id=\"3\",pid=\"99\",partition=\"default\"} 0",
            "partita_registration_refusals_total{reason=\"version\"} 1",
            "partita_registration_refusals_total{reason=\"permission_denied\"} 0",
            "partita_counter_source{partition=\"default\",source=\"none\"} 1",
            "partita_reallocation_duration_seconds_count 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }

    #[test]
    fn encodes_the_page_movers_counters_and_pages_per_node() {
        let status = Status {
            memory: crate::status::MemoryStatus {
                running: true,
                nodes: 2,
                calls: 7,
                moved_bytes: 4096 * 3,
                migrations: 1,
                deferred: 2,
                errors: 1,
            },
            applications: vec![AppStatus {
                id: 4,
                pid: 77,
                name: "p".into(),
                partition: "default".into(),
                pages_per_node: [(0, 10), (1, 500)].into_iter().collect(),
                memory_moved_bytes: 4096 * 3,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = encode(&status, &Telemetry::default());
        for line in [
            "partita_numa_migration_calls_total 7",
            "partita_numa_migrated_bytes_total 12288",
            "partita_numa_migrations_total 1",
            "partita_numa_migrations_deferred_total 2",
            "partita_numa_migration_errors_total 1",
            "partita_app_memory_moved_bytes_total{app=\"p\",id=\"4\",pid=\"77\",partition=\"default\"} 12288",
            "partita_app_memory_pages{app=\"p\",id=\"4\",pid=\"77\",node=\"1\"} 500",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}

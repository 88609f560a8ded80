//! The runtime's own traffic measurement, end to end, with page faults standing in for LLC
//! misses (this VM has no PMU): the pool's workers touch fresh pages and the bytes appear in
//! the control page a scripted manager handed the client; the test thread's own faults (not a
//! worker) do not; the published total never goes backwards when workers exit.
//!
//! One test per file: the event is chosen once per process.
#![cfg(partita_linux)] // measured traffic (perf events): Linux-only (crates/runtime/build.rs)

use partita_protocol::client::read_frame;
use partita_protocol::page::PageMap;
use partita_protocol::sys::send_with_fd;
use partita_protocol::wire::{ClientMessage, ManagerMessage, MAX_CLIENT_FRAME, PROTOCOL_VERSION};
use partita_runtime::{MeasuredTraffic, ThreadPoolBuilder, TrafficEvent};
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::net::UnixListener;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const LONG: Duration = Duration::from_secs(10);
const PAGES: usize = 1024;

/// Write one byte in each of `pages` fresh anonymous pages (no huge pages, so each is one
/// fault), then unmap them.
fn touch_fresh_pages(pages: usize, page: usize) {
    let len = pages * page;
    // SAFETY: an anonymous private mapping with no address hint; checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED, "mmap");
    // SAFETY: `p..p+len` is the mapping just made; advice only.
    unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) };
    for i in 0..pages {
        // SAFETY: i * page < len, inside the writable mapping.
        unsafe { std::ptr::write_volatile((p as *mut u8).add(i * page), 1) };
    }
    // SAFETY: the mapping made above, no longer used.
    unsafe { libc::munmap(p, len) };
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + LONG;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The scripted manager: accept, read the hello, hand over a page (the connection is kept
/// open by the caller).
fn scripted_manager(listener: &UnixListener) -> (std::os::unix::net::UnixStream, PageMap) {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + LONG;
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                assert!(Instant::now() < deadline, "no client connected");
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("accept: {e}"),
        }
    };
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(LONG)).unwrap();
    let payload = read_frame(&mut s, MAX_CLIENT_FRAME).unwrap();
    assert!(matches!(
        ClientMessage::decode(&payload).unwrap(),
        ClientMessage::Hello(_)
    ));
    let map = PageMap::create(1, 2).unwrap();
    let welcome = ManagerMessage::Welcome {
        version: PROTOCOL_VERSION,
        app_id: 1,
        partition: String::new(),
    }
    .encode();
    send_with_fd(s.as_fd(), &welcome, map.fd()).unwrap();
    (s, map)
}

#[test]
fn workers_page_faults_reach_the_control_page() {
    let m = partita_runtime::measure_traffic_with(TrafficEvent::PageFaults);
    let MeasuredTraffic::Counting {
        event: TrafficEvent::PageFaults,
        bytes_per_event: page,
    } = m
    else {
        eprintln!("software perf events not available here; skipping: {m:?}");
        return;
    };
    let dir = std::env::temp_dir().join(format!("partita-traffic-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("m.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    // SAFETY: the only test in this process; nothing reads the environment concurrently.
    unsafe {
        std::env::set_var("PARTITA_SOCKET", &socket);
        std::env::set_var("PARTITA_CLIENT_TICK_US", "1000");
        std::env::remove_var("PARTITA");
    }
    let pool = ThreadPoolBuilder::new().num_threads(2).build().unwrap();

    let (_conn, map) = scripted_manager(&listener);
    let published = || map.app.bandwidth.load(Ordering::Relaxed);
    wait_until("a first heartbeat", || {
        map.app.heartbeat.load(Ordering::Relaxed) != 0
    });

    // The test thread is not a worker: its faults are not the pool's traffic.
    let before = partita_runtime::published_bytes();
    touch_fresh_pages(PAGES, page as usize);
    let outside = partita_runtime::published_bytes() - before;
    assert!(
        outside < (PAGES as u64 / 4) * page,
        "{outside} bytes counted for a non-worker's {PAGES} faults"
    );

    // Every worker touches PAGES fresh pages: at least that many bytes get published.
    let start = published();
    pool.broadcast(|_| touch_fresh_pages(PAGES, page as usize));
    let want = start + 2 * PAGES as u64 * page;
    wait_until("the workers' faults in the control page", || {
        published() >= want
    });

    // Workers exit: their counts are retired, the total does not go backwards.
    let last = partita_runtime::published_bytes();
    drop(pool);
    for _ in 0..50 {
        assert!(partita_runtime::published_bytes() >= last);
        std::thread::sleep(Duration::from_millis(2));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

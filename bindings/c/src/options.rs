//! Option structs as C sees them, and their conversion to the core's options.

use std::time::Duration;

use shmlink::{ClientOptions, ServerOptions, WaitStrategy};

use std::ffi::c_char;

use crate::guard::{cstr, slice, text};
use crate::status::{shmlink_status, Failure};

/// Smallest ring size of an `shm:` session, in bytes (a power of two).
pub const SHMLINK_MIN_RING_SIZE: u64 = 4096;
/// Largest ring size of an `shm:` session, in bytes.
pub const SHMLINK_MAX_RING_SIZE: u64 = 268_435_456;
/// Default ring size of an `shm:` session, in bytes.
pub const SHMLINK_DEFAULT_RING_SIZE: u64 = 65_536;
/// Smallest `max_message_size` (an error reply always fits it).
pub const SHMLINK_MIN_MESSAGE_SIZE: u64 = 1024;
/// Largest `max_message_size`.
pub const SHMLINK_MAX_MESSAGE_SIZE: u64 = 68_719_476_720;
/// Default `max_message_size` (64 MiB).
pub const SHMLINK_DEFAULT_MAX_MESSAGE_SIZE: u64 = 67_108_864;

// The header's copies of the core's limits, checked at compile time.
const _: () = assert!(SHMLINK_MIN_RING_SIZE == shmlink::MIN_RING_SIZE as u64);
const _: () = assert!(SHMLINK_MAX_RING_SIZE == shmlink::MAX_RING_SIZE as u64);
const _: () = assert!(SHMLINK_DEFAULT_RING_SIZE == shmlink::DEFAULT_RING_SIZE as u64);
const _: () = assert!(SHMLINK_MIN_MESSAGE_SIZE == shmlink::MIN_MESSAGE_LIMIT as u64);
const _: () = assert!(SHMLINK_MAX_MESSAGE_SIZE == shmlink::MAX_MESSAGE_SIZE as u64);
const _: () = assert!(SHMLINK_DEFAULT_MAX_MESSAGE_SIZE == shmlink::DEFAULT_MAX_MESSAGE as u64);

/// Default `max_arena_bytes` of clients and servers (2 GiB of address space;
/// memory is used only as loans are filled, and reused).
pub const SHMLINK_DEFAULT_ARENA_BYTES: u64 = 2_147_483_648;

// The header's copy of the core's default, checked at compile time.
const _: () = assert!(SHMLINK_DEFAULT_ARENA_BYTES == shmlink::DEFAULT_ARENA_BYTES);

/// Wait strategy: the library default (`spin`, adaptive: spins while its CPU
/// is free, as long as recent waits predict, up to 400 µs; sleeps as soon as
/// another thread wants its CPU). `SHMLINK_WAIT_SPIN` with `spin_us` 0 is the
/// same.
pub const SHMLINK_WAIT_DEFAULT: u32 = 0;
/// Wait strategy: sleep on the futex at once (lowest CPU).
pub const SHMLINK_WAIT_SLEEP: u32 = 1;
/// Wait strategy: spin up to `spin_us` microseconds, then sleep (0: the
/// adaptive default).
pub const SHMLINK_WAIT_SPIN: u32 = 2;
/// Wait strategy: never sleep (lowest latency, a full core while waiting).
pub const SHMLINK_WAIT_BUSY: u32 = 3;

/// Options of a client. Zero in any field means its default; fill with
/// `shmlink_client_options_init` or zero-initialise.
///
/// Extensible: fields are only ever appended, and `struct_size` says how
/// many bytes the caller's struct has (`shmlink_client_options_init` sets
/// it; 0 means the struct of the first release with `struct_size`, this
/// one). The library reads only those bytes, the fields it knows beyond
/// them keep their defaults, and a larger struct (a newer header) is
/// taken when the fields this library does not know are all zero, refused
/// (`SHMLINK_E_INVALID_ARGUMENT`) otherwise: code compiled against an
/// older or newer header keeps working without a new soname.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shmlink_client_options {
    /// Bytes of this struct as the caller compiled it: `sizeof`, set by
    /// `shmlink_client_options_init` (0: this release's size).
    pub struct_size: usize,
    /// Timeout of connecting and of each call, in microseconds (0: 5 s).
    pub timeout_us: u64,
    /// One of `SHMLINK_WAIT_*` (0: default).
    pub wait: u32,
    /// Spin time for `SHMLINK_WAIT_SPIN`, in microseconds (0: 50).
    pub spin_us: u32,
    /// Ring bytes per direction on `shm:` sessions, a power of two (0: 64 KiB).
    pub ring_size: u64,
    /// Largest message sent or accepted, in bytes (0: 64 MiB).
    pub max_message_size: u64,
    /// Most bytes of arena this client maps to lend requests from (`shm:`
    /// and `unix:`, to a server that takes lent requests), and most bytes
    /// of the server's arena it maps to read lent responses in place (0:
    /// `SHMLINK_DEFAULT_ARENA_BYTES`). Turn both off with `no_arena`.
    pub max_arena_bytes: u64,
    /// Requests of at least this many bytes sent by `shmlink_client_call*`
    /// go through the arena (copied once into it, read in place by the
    /// server) instead of streaming; they stream when the arena is full
    /// (0: 64 KiB; `UINT64_MAX`: never, only explicit loans lend).
    pub arena_threshold: u64,
    /// 1: never lend (no arena: `shmlink_client_loan` fails with
    /// `SHMLINK_E_INVALID_ARGUMENT`, every request and response streams,
    /// whatever `max_arena_bytes` says); 0: lend (default). Other values are
    /// invalid.
    pub no_arena: u32,
    /// 1: an `shm:` session must have shared memory: a server that cannot
    /// give it one (its shared-memory limit reached, memfd or mmap failing)
    /// refuses the connect (`SHMLINK_E_REFUSED`, saying why) instead of
    /// continuing over the socket; 0: continue over the socket (default;
    /// `shmlink_client_transport` tells). Other values are invalid.
    pub shm_required: u32,
}

/// Options of a server. Zero in any field means its default; fill with
/// `shmlink_server_options_init` or zero-initialise. The arrays and the
/// `handover` string are read during `shmlink_server_bind` (or
/// `shmlink_server_take_over`) only.
///
/// Extensible as `shmlink_client_options` is: `struct_size` (set by
/// `shmlink_server_options_init`; 0: this release's size) says how many
/// bytes the library reads, and fields are only ever appended.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shmlink_server_options {
    /// Bytes of this struct as the caller compiled it: `sizeof`, set by
    /// `shmlink_server_options_init` (0: this release's size).
    pub struct_size: usize,
    /// Uids allowed besides the server's own (NULL when the length is 0).
    pub allowed_uids: *const u32,
    /// Number of entries in `allowed_uids`.
    pub allowed_uids_len: usize,
    /// Gids allowed (a peer's primary gid).
    pub allowed_gids: *const u32,
    /// Number of entries in `allowed_gids`.
    pub allowed_gids_len: usize,
    /// Permission bits of the socket files (0: 0600, or 0660 with a group).
    pub socket_mode: u32,
    /// 1: give the socket files to group `socket_group`.
    pub socket_group_set: u32,
    /// Group of the socket files, when `socket_group_set` is 1.
    pub socket_group: u32,
    /// Most sessions at once (0: 4096).
    pub max_sessions: u32,
    /// One of `SHMLINK_WAIT_*` (0: default).
    pub wait: u32,
    /// Spin time for `SHMLINK_WAIT_SPIN`, in microseconds (0: 50).
    pub spin_us: u32,
    /// Largest message sent or accepted, in bytes (0: 64 MiB).
    pub max_message_size: u64,
    /// Time a connecting client has to send its hello, in microseconds (0: 2 s).
    pub handshake_timeout_us: u64,
    /// Time writing a response may wait for ring space, in microseconds (0: 5 s).
    pub send_timeout_us: u64,
    /// 1: refuse requests with file descriptors (the caller gets
    /// `SHMLINK_E_INVALID_ARGUMENT`, nothing sent); 0: accept them (default).
    /// Lent requests and responses need descriptors: 1 also refuses them
    /// (every request and response streams).
    pub refuse_fds: u32,
    /// Most bytes of a client's arena a session maps to read lent requests
    /// in place, and most bytes of its own arena a session lends large
    /// responses from (responses of at least 64 KiB, to clients that read
    /// them in place; beyond it they stream) (0:
    /// `SHMLINK_DEFAULT_ARENA_BYTES`).
    pub max_arena_bytes: u64,
    /// 1: take no lent requests and lend no responses (clients'
    /// `shmlink_client_loan` fails with `SHMLINK_E_INVALID_ARGUMENT`; large
    /// calls and responses stream); 0: take and lend them (default). Other
    /// values are invalid.
    pub refuse_arena: u32,
    /// Most bytes of session segments (rings and header, 64 KiB rings: 132
    /// KiB a session) held at once; an `shm:` session past it continues
    /// over its socket, or is refused when its client requires shared
    /// memory (0: no limit).
    pub max_shm_bytes: u64,
    /// A Unix socket path (mode 0600) on which a successor process may take
    /// this server over with `shmlink_server_take_over`: its listeners and
    /// live sessions go to the successor, and this server stops
    /// (`shmlink_server_wait` returns). NULL: none.
    pub handover: *const c_char,
}

impl Default for shmlink_server_options {
    fn default() -> Self {
        shmlink_server_options {
            struct_size: 0,
            allowed_uids: std::ptr::null(),
            allowed_uids_len: 0,
            allowed_gids: std::ptr::null(),
            allowed_gids_len: 0,
            socket_mode: 0,
            socket_group_set: 0,
            socket_group: 0,
            max_sessions: 0,
            wait: 0,
            spin_us: 0,
            max_message_size: 0,
            handshake_timeout_us: 0,
            send_timeout_us: 0,
            refuse_fds: 0,
            max_arena_bytes: 0,
            refuse_arena: 0,
            max_shm_bytes: 0,
            handover: std::ptr::null(),
        }
    }
}

/// Fills `options` with the defaults, spelled out. NULL is ignored.
///
/// # Safety
/// `options` is NULL or points to writable memory for the struct.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_options_init(options: *mut shmlink_client_options) {
    let d = ClientOptions::default();
    let filled = shmlink_client_options {
        struct_size: std::mem::size_of::<shmlink_client_options>(),
        timeout_us: micros(d.timeout),
        wait: SHMLINK_WAIT_DEFAULT,
        spin_us: micros(WaitStrategy::DEFAULT_SPIN) as u32,
        ring_size: d.ring_size as u64,
        max_message_size: d.max_message_size as u64,
        max_arena_bytes: d.max_arena_bytes,
        arena_threshold: d.arena_threshold as u64,
        no_arena: u32::from(d.max_arena_bytes == 0),
        shm_required: u32::from(d.shm_required),
    };
    if !options.is_null() {
        // SAFETY: `options` is writable, per the contract; `write` does not
        // read the (possibly uninitialised) old value.
        unsafe { options.write(filled) };
    }
}

/// Fills `options` with the defaults, spelled out. NULL is ignored.
///
/// # Safety
/// `options` is NULL or points to writable memory for the struct.
#[no_mangle]
pub unsafe extern "C" fn shmlink_server_options_init(options: *mut shmlink_server_options) {
    let d = ServerOptions::default();
    let filled = shmlink_server_options {
        struct_size: std::mem::size_of::<shmlink_server_options>(),
        socket_mode: d.effective_socket_mode(),
        max_sessions: u32::try_from(d.max_sessions).unwrap_or(u32::MAX),
        spin_us: micros(WaitStrategy::DEFAULT_SPIN) as u32,
        max_message_size: d.max_message_size as u64,
        handshake_timeout_us: micros(d.handshake_timeout),
        send_timeout_us: micros(d.send_timeout),
        refuse_fds: u32::from(!d.accept_fds),
        max_arena_bytes: d.max_arena_bytes,
        refuse_arena: u32::from(d.max_arena_bytes == 0),
        max_shm_bytes: 0,
        ..shmlink_server_options::default()
    };
    if !options.is_null() {
        // SAFETY: `options` is writable, per the contract; `write` does not
        // read the (possibly uninitialised) old value.
        unsafe { options.write(filled) };
    }
}

/// Reads an extensible options struct (`struct_size` first) the caller
/// passed: `None` for NULL; else the first `struct_size` bytes (0: all of
/// this release's), the rest at `T`'s default (zero); a caller's struct
/// larger than this release's is taken only when its extra bytes are all
/// zero (options this library does not know must not be silently lost).
///
/// # Safety
/// `p` is NULL, or points to readable memory of `struct_size` bytes
/// (`size_of::<T>()` when `struct_size` is 0) starting with a `usize`.
pub(crate) unsafe fn read_sized<T: Copy + Default>(
    p: *const T,
    name: &str,
) -> Result<Option<T>, Failure> {
    if p.is_null() {
        return Ok(None);
    }
    let full = std::mem::size_of::<T>();
    // SAFETY: `p` points to at least the leading `usize`, per the contract.
    let declared = unsafe { p.cast::<usize>().read_unaligned() };
    let n = if declared == 0 { full } else { declared };
    if n < std::mem::size_of::<usize>() {
        return Err(invalid(
            &format!("{name}.struct_size"),
            format!("{n} is smaller than the struct_size field itself"),
        ));
    }
    if n > full {
        // SAFETY: the caller's struct is `n` bytes, per its struct_size.
        let extra = unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(full), n - full) };
        if extra.iter().any(|&b| b != 0) {
            return Err(invalid(
                &format!("{name}.struct_size"),
                format!(
                    "the struct has {n} bytes and sets options past this library's {full} \
                     (a newer header): upgrade the library, or leave those fields zero"
                ),
            ));
        }
    }
    let mut out = T::default();
    // SAFETY: the first min(n, full) bytes of the caller's struct are
    // readable (per struct_size) and fit in `out`; every field of these
    // structs is an integer or a pointer, for which any bytes are a value.
    unsafe {
        std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&raw mut out).cast::<u8>(), n.min(full));
    }
    Ok(Some(out))
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn invalid(name: &str, reason: String) -> Failure {
    Failure::new(
        shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
        format!("invalid option {name}: {reason}"),
    )
}

/// A wait strategy from its C code.
fn wait(code: u32, spin_us: u32) -> Result<WaitStrategy, Failure> {
    let spin = match spin_us {
        0 => WaitStrategy::DEFAULT_SPIN,
        us => Duration::from_micros(u64::from(us)),
    };
    match code {
        SHMLINK_WAIT_DEFAULT => Ok(WaitStrategy::Spin(WaitStrategy::DEFAULT_SPIN)),
        SHMLINK_WAIT_SLEEP => Ok(WaitStrategy::Sleep),
        SHMLINK_WAIT_SPIN => Ok(WaitStrategy::Spin(spin)),
        SHMLINK_WAIT_BUSY => Ok(WaitStrategy::Busy),
        n => Err(invalid(
            "wait",
            format!("{n} is not one of SHMLINK_WAIT_DEFAULT/SLEEP/SPIN/BUSY (0-3)"),
        )),
    }
}

fn size(name: &str, v: u64, default: usize) -> Result<usize, Failure> {
    match v {
        0 => Ok(default),
        v => usize::try_from(v).map_err(|_| invalid(name, format!("{v} is too large"))),
    }
}

/// An arena limit: 0 keeps `default`; `off` (a 0/1 flag named `flag`) turns
/// the arena off whatever the limit says.
fn arena_limit(limit: u64, off: u32, flag: &str, default: u64) -> Result<u64, Failure> {
    match off {
        0 if limit == 0 => Ok(default),
        0 => Ok(limit),
        1 => Ok(0),
        n => Err(invalid(flag, format!("{n} is not 0 or 1"))),
    }
}

fn duration(us: u64, default: Duration) -> Duration {
    match us {
        0 => default,
        us => Duration::from_micros(us),
    }
}

/// The core's client options for `o` (NULL: defaults). The core validates ranges.
pub(crate) fn client_options(o: Option<&shmlink_client_options>) -> Result<ClientOptions, Failure> {
    let d = ClientOptions::default();
    let Some(o) = o else { return Ok(d) };
    Ok(ClientOptions {
        timeout: duration(o.timeout_us, d.timeout),
        wait: wait(o.wait, o.spin_us)?,
        ring_size: size("ring_size", o.ring_size, d.ring_size)?,
        max_message_size: size("max_message_size", o.max_message_size, d.max_message_size)?,
        max_arena_bytes: arena_limit(o.max_arena_bytes, o.no_arena, "no_arena", d.max_arena_bytes)?,
        arena_threshold: match o.arena_threshold {
            0 => d.arena_threshold,
            // Beyond the address space: no request reaches it.
            v => usize::try_from(v).unwrap_or(usize::MAX),
        },
        shm_required: match o.shm_required {
            0 => false,
            1 => true,
            n => return Err(invalid("shm_required", format!("{n} is not 0 or 1"))),
        },
        ..d
    })
}

/// The core's server options for `o` (NULL: defaults).
///
/// # Safety
/// The arrays in `o` are valid for their lengths (or NULL with length 0);
/// `o.handover` is NULL or a C string.
pub(crate) unsafe fn server_options(
    o: Option<&shmlink_server_options>,
) -> Result<ServerOptions, Failure> {
    let d = ServerOptions::default();
    let Some(o) = o else { return Ok(d) };
    // SAFETY: the arrays are valid for their lengths, per this function's contract.
    let (uids, gids) = unsafe {
        (
            slice(o.allowed_uids, o.allowed_uids_len, "allowed_uids")?,
            slice(o.allowed_gids, o.allowed_gids_len, "allowed_gids")?,
        )
    };
    Ok(ServerOptions {
        allowed_uids: uids.to_vec(),
        allowed_gids: gids.to_vec(),
        socket_mode: (o.socket_mode != 0).then_some(o.socket_mode),
        socket_group: match o.socket_group_set {
            0 => None,
            1 => Some(o.socket_group),
            n => return Err(invalid("socket_group_set", format!("{n} is not 0 or 1"))),
        },
        max_sessions: match o.max_sessions {
            0 => d.max_sessions,
            n => n as usize,
        },
        wait: wait(o.wait, o.spin_us)?,
        max_message_size: size("max_message_size", o.max_message_size, d.max_message_size)?,
        handshake_timeout: duration(o.handshake_timeout_us, d.handshake_timeout),
        send_timeout: duration(o.send_timeout_us, d.send_timeout),
        accept_fds: match o.refuse_fds {
            0 => d.accept_fds,
            1 => false,
            n => return Err(invalid("refuse_fds", format!("{n} is not 0 or 1"))),
        },
        max_arena_bytes: arena_limit(
            o.max_arena_bytes,
            o.refuse_arena,
            "refuse_arena",
            d.max_arena_bytes,
        )?,
        max_shm_bytes: match o.max_shm_bytes {
            0 => d.max_shm_bytes,
            n => n,
        },
        // SAFETY: NULL or a C string, per this function's contract.
        handover: match unsafe { cstr(o.handover) } {
            None => None,
            Some(p) => Some(std::path::PathBuf::from(text(Some(p), "handover")?)),
        },
        // Sessions ended for a protocol error or a stalled client are
        // reported on standard error (the C host's log).
        ..d
    })
}

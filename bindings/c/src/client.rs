//! The client handle and its entry points.

use std::ffi::{c_char, c_int};
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use shmlink::{Client, Loan, Transport};

use crate::buffer::shmlink_buffer;
use crate::guard::{cstr, free_box, guard, required, slice, text};
use crate::options::{client_options, read_sized, shmlink_client_options};
use crate::status::{shmlink_status, Failure};
use crate::view::shmlink_view;

/// A client session (opaque). One thread at a time: a call made while another
/// thread is inside a call on the same client fails with
/// `SHMLINK_E_INVALID_ARGUMENT` instead of corrupting it.
#[derive(Debug)]
pub struct shmlink_client {
    state: Mutex<Option<Client>>,
    address: String,
    /// Whether the session was usable when the last call on it returned:
    /// what `shmlink_client_is_connected` says while another thread is in
    /// a call (the lock is held), so a busy session is not taken for dead.
    usable: AtomicBool,
}

impl shmlink_client {
    /// The open client, or why it cannot be used.
    fn open(&self) -> Result<MutexGuard<'_, Option<Client>>, Failure> {
        let g = match self.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                return Err(Failure::new(
                    shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
                    format!(
                        "client of {} is in use by another thread (a client serves one thread at a time)",
                        self.address
                    ),
                ))
            }
        };
        if g.is_none() {
            return Err(Failure::new(
                shmlink_status::SHMLINK_E_CLOSED,
                format!(
                    "client of {} was closed with shmlink_client_close",
                    self.address
                ),
            ));
        }
        Ok(g)
    }

    /// Runs `f` on the open client; after a failure, notes whether the
    /// session is still usable (a success changes nothing).
    fn with<R>(&self, f: impl FnOnce(&mut Client) -> Result<R, Failure>) -> Result<R, Failure> {
        let mut g = self.open()?;
        match g.as_mut() {
            Some(c) => {
                let result = f(c);
                if result.is_err() {
                    self.usable.store(c.is_connected(), Ordering::Relaxed);
                }
                result
            }
            None => Err(Failure::null("client")),
        }
    }
}

/// Most file descriptors one request carries (`shmlink_client_call_fds`,
/// `shmlink_client_send_fds`); more fail with `SHMLINK_E_INVALID_ARGUMENT`.
pub const SHMLINK_MAX_FDS: usize = 64;

// The header's copy of the core's limit, checked at compile time.
const _: () = assert!(SHMLINK_MAX_FDS == shmlink::MAX_FDS);

/// The caller's descriptor numbers as borrowed descriptors, each checked to
/// be open first (a closed number must not become a `BorrowedFd`).
///
/// # Safety
/// A non-NULL `fds` points to `nfds` readable ints; the open ones stay open
/// for `'a` (the caller's contract: during the call).
unsafe fn borrow_fds<'a>(fds: *const c_int, nfds: usize) -> Result<Vec<BorrowedFd<'a>>, Failure> {
    // SAFETY: valid for `nfds` ints when non-NULL, per this function's contract.
    let numbers = unsafe { slice(fds, nfds, "fds") }?;
    let mut borrowed = Vec::with_capacity(numbers.len());
    for (i, &fd) in numbers.iter().enumerate() {
        if !shmlink_sys::fdpass::is_open(fd) {
            return Err(Failure::new(
                shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
                format!("fds[{i}] = {fd} is not an open file descriptor; nothing was sent"),
            ));
        }
        // SAFETY: `fd` is open (checked just above) and stays open for `'a`,
        // per this function's contract.
        borrowed.push(unsafe { BorrowedFd::borrow_raw(fd) });
    }
    Ok(borrowed)
}

/// The arguments every call and send takes: the client, the request bytes
/// and the descriptors (checked open, borrowed).
///
/// # Safety
/// `client` is NULL or a live client; `request` is valid for `request_len`
/// bytes; `fds` as in `borrow_fds`.
unsafe fn request_args<'a>(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
) -> Result<(&'a shmlink_client, &'a [u8], Vec<BorrowedFd<'a>>), Failure> {
    // SAFETY: the pointers are NULL or valid, per this function's contract.
    let (client, request) = unsafe { (client.as_ref(), slice(request, request_len, "request")) };
    let (client, request) = (required(client, "client")?, request?);
    // SAFETY: as above; the descriptors stay open during the call.
    let fds = unsafe { borrow_fds(fds, nfds) }?;
    Ok((client, request, fds))
}

/// The body of every `shmlink_client_call*`: a call with descriptors (none
/// for the plain calls) and a timeout in microseconds (0: the default).
///
/// # Safety
/// As `shmlink_client_call_fds_timeout`.
unsafe fn call(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
    timeout_us: u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, request, fds) =
            unsafe { request_args(client, request, request_len, fds, nfds) }?;
        // SAFETY: as above.
        unsafe {
            exchange(client, timeout_us, response, |c, t| {
                c.call_with_fds_timeout(request, &fds, t)
            })
        }
    })
}

/// The body of `shmlink_client_call_loan*`: the loan is taken first, so it
/// is the library's (sent, or back in its arena) whatever the outcome.
///
/// # Safety
/// As `shmlink_client_call_loan_timeout`.
unsafe fn call_loan(
    client: *mut shmlink_client,
    loan: *mut shmlink_loan,
    timeout_us: u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a loan from `shmlink_client_loan` not yet given
        // back, per the contract: ours from here on.
        let loan = required(
            (!loan.is_null()).then(|| unsafe { Box::from_raw(loan) }),
            "loan",
        )?;
        // SAFETY: NULL or a live client, per the contract.
        let client = required(unsafe { client.as_ref() }, "client")?;
        // SAFETY: as above.
        unsafe {
            exchange(client, timeout_us, response, |c, t| {
                c.call_loan_timeout(loan.loan, t)
            })
        }
    })
}

/// What every call shares once its request is ready: the response buffer
/// recycled, the timeout resolved, `send` made on the open client, its
/// response put into the buffer.
///
/// # Safety
/// `response` is NULL or a buffer that is all zero or was filled by this library.
unsafe fn exchange(
    client: &shmlink_client,
    timeout_us: u64,
    response: *mut shmlink_buffer,
    send: impl FnOnce(&mut Client, Duration) -> shmlink::Result<Vec<u8>>,
) -> Result<(), Failure> {
    // SAFETY: as this function's contract.
    unsafe {
        exchange_into(client, timeout_us, response, |c, t, buffer| {
            buffer.put(send(c, t)?);
            Ok(())
        })
    }
}

/// `exchange` where `fill` puts the response into the buffer itself.
///
/// # Safety
/// As `exchange`.
unsafe fn exchange_into<T>(
    client: &shmlink_client,
    timeout_us: u64,
    response: *mut shmlink_buffer,
    fill: impl FnOnce(&mut Client, Duration, &mut shmlink_buffer) -> shmlink::Result<T>,
) -> Result<T, Failure> {
    // SAFETY: NULL or valid, per this function's contract.
    let response = required(unsafe { response.as_mut() }, "response")?;
    client.with(|c| {
        // SAFETY: the buffer is all zero or was filled by the library.
        c.recycle(unsafe { response.take() });
        let t = timeout(c, timeout_us);
        Ok(fill(c, t, response)?)
    })
}

/// The body of `shmlink_client_send` and `shmlink_client_send_fds`.
///
/// # Safety
/// As `shmlink_client_send_fds`.
unsafe fn send(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
    out_id: *mut u64,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, request, fds) =
            unsafe { request_args(client, request, request_len, fds, nfds) }?;
        // SAFETY: as above.
        let out_id = unsafe { out_id.as_mut() };
        let id = client.with(|c| Ok(c.send_with_fds(request, &fds)?))?;
        if let Some(out) = out_id {
            *out = id;
        }
        Ok(())
    })
}

fn timeout(c: &Client, us: u64) -> Duration {
    match us {
        0 => c.options().timeout,
        us => Duration::from_micros(us),
    }
}

/// Connects to `address` (`shm:PATH`, `unix:PATH` or `tcp:HOST:PORT`) and
/// performs the handshake.
///
/// Ownership: `address` and `options` are read during the call only (options
/// may be NULL: defaults). On success `*out` receives a client the caller owns
/// and releases with `shmlink_client_free`; on failure `*out` is set to NULL.
/// Thread-safe.
///
/// # Safety
/// `address` is NULL or a NUL-terminated string; `options` is NULL or valid;
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_connect(
    address: *const c_char,
    options: *const shmlink_client_options,
    out: *mut *mut shmlink_client,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (address, out) = unsafe { (cstr(address), out.as_mut()) };
        let out = required(out, "out")?;
        *out = std::ptr::null_mut();
        // SAFETY: `options` is NULL or valid for its struct_size, per the contract.
        let options = unsafe { read_sized(options, "options") }?;
        let address = text(address, "address")?;
        let client = Client::connect(address, client_options(options.as_ref())?)?;
        *out = Box::into_raw(Box::new(shmlink_client {
            state: Mutex::new(Some(client)),
            address: address.to_string(),
            usable: AtomicBool::new(true),
        }));
        Ok(())
    })
}

/// Calls with the client's default timeout; the response goes into `response`.
///
/// Ownership: `request` is read during the call; `response` stays the caller's,
/// its bytes are replaced (its old allocation reused). Not thread-safe per client.
///
/// # Safety
/// `client` is NULL or a live client; `request` is valid for `request_len`
/// bytes (NULL allowed when 0); `response` is NULL or a buffer that is all
/// zero or was filled by this library.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe { shmlink_client_call_timeout(client, request, request_len, 0, response) }
}

/// Calls with a timeout in microseconds (0: the client's default). A response
/// arriving after the timeout is discarded, never returned to a later call.
///
/// # Safety
/// As `shmlink_client_call`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_timeout(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    timeout_us: u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract (no descriptors).
    unsafe {
        call(
            client,
            request,
            request_len,
            std::ptr::null(),
            0,
            timeout_us,
            response,
        )
    }
}

/// Calls with file descriptors that go with the request (`shm:` and `unix:`
/// sessions, at most `SHMLINK_MAX_FDS`), with the client's default timeout.
/// The handler receives duplicates: the caller's descriptors stay the
/// caller's, open, and are only read during the call.
///
/// Fails with nothing sent and the session usable: `SHMLINK_E_UNSUPPORTED`
/// over `tcp:`; `SHMLINK_E_INVALID_ARGUMENT` for more than `SHMLINK_MAX_FDS`,
/// a descriptor that is not open (the message names its index and number),
/// `fds` NULL with `nfds` > 0, or a server that refuses descriptors.
///
/// # Safety
/// As `shmlink_client_call`; `fds` is NULL (when `nfds` is 0) or points to
/// `nfds` ints, and descriptors open at the call stay open until it returns.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_fds(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe { call(client, request, request_len, fds, nfds, 0, response) }
}

/// `shmlink_client_call_fds` with a timeout in microseconds (0: the client's
/// default), as in `shmlink_client_call_timeout`.
///
/// # Safety
/// As `shmlink_client_call_fds`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_fds_timeout(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
    timeout_us: u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe {
        call(
            client,
            request,
            request_len,
            fds,
            nfds,
            timeout_us,
            response,
        )
    }
}

/// A buffer of a client's arena lent for one request (opaque): filled in
/// place through the pointer `shmlink_client_loan` gave, then sent with
/// `shmlink_client_call_loan` or released with `shmlink_loan_free`. It keeps
/// its memory mapped by itself: it stays valid (and must still be freed)
/// after its client is closed or freed, it just cannot be sent then.
#[derive(Debug)]
pub struct shmlink_loan {
    loan: Loan,
}

/// Lends `len` bytes of the client's arena to fill in place (`shm:` and
/// `unix:`, to a server that takes lent requests): the server reads the
/// request where it lies, no copy. On success `*out_loan` receives a loan
/// the caller owns (send it with `shmlink_client_call_loan*`, or release it
/// with `shmlink_loan_free`) and `*out_data` points at its `len` writable
/// bytes, valid until the loan is sent or freed; on failure both are set to
/// NULL. A freed loan's room is reused by the next.
///
/// Fails with nothing lent and the session usable:
/// `SHMLINK_E_ARENA_FULL` when the arena (at most `max_arena_bytes`) cannot
/// hold `len` more bytes now (send or free loans; `shmlink_client_call`
/// streams instead); `SHMLINK_E_INVALID_ARGUMENT` when the server takes no
/// lent requests or the client's `no_arena` is 1; `SHMLINK_E_UNSUPPORTED`
/// over `tcp:`. A loan longer than the largest message fails when it is
/// sent (`SHMLINK_E_TOO_LARGE`).
/// Not thread-safe per client.
///
/// # Safety
/// `client` is NULL or a live client; `out_loan` and `out_data` are NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_loan(
    client: *mut shmlink_client,
    len: usize,
    out_loan: *mut *mut shmlink_loan,
    out_data: *mut *mut u8,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, out_loan, out_data) =
            unsafe { (client.as_ref(), out_loan.as_mut(), out_data.as_mut()) };
        let (out_loan, out_data) = (
            required(out_loan, "out_loan")?,
            required(out_data, "out_data")?,
        );
        *out_loan = std::ptr::null_mut();
        *out_data = std::ptr::null_mut();
        let client = required(client, "client")?;
        let mut loan = client.with(|c| Ok(c.loan(len)?))?;
        // The bytes lie in the loan's mapping, not in the box: the pointer
        // stays put when the loan moves.
        *out_data = loan.as_mut_ptr();
        *out_loan = Box::into_raw(Box::new(shmlink_loan { loan }));
        Ok(())
    })
}

/// Calls with a loan filled in place (from `shmlink_client_loan` of this
/// client), with the client's default timeout; the response goes into
/// `response` as in `shmlink_client_call`.
///
/// Ownership: the call takes the loan whatever the outcome (sent, or back
/// in the arena on any failure, NULL arguments included): the handle and
/// its data pointer are invalid once it returns; never free it afterwards.
///
/// # Safety
/// `client` is NULL or a live client; `loan` is NULL or a loan not yet sent
/// or freed; `response` as in `shmlink_client_call`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_loan(
    client: *mut shmlink_client,
    loan: *mut shmlink_loan,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe { call_loan(client, loan, 0, response) }
}

/// `shmlink_client_call_loan` with a timeout in microseconds (0: the
/// client's default), as in `shmlink_client_call_timeout`. It takes the loan
/// whatever the outcome, as `shmlink_client_call_loan`.
///
/// # Safety
/// As `shmlink_client_call_loan`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_loan_timeout(
    client: *mut shmlink_client,
    loan: *mut shmlink_loan,
    timeout_us: u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe { call_loan(client, loan, timeout_us, response) }
}

/// Copies `len` bytes from `data` into the loan at byte `offset`: what
/// `memcpy(out_data + offset, data, len)` does, except that from 12 MiB on
/// the copy bypasses the caches
/// (non-temporal stores, as `shmlink_client_call` copies large requests into
/// the arena): faster for large buffers, and the caller's caches keep what
/// they held. `data` may be NULL when `len` is 0.
///
/// Fails with `SHMLINK_E_INVALID_ARGUMENT` (nothing copied) when `loan` is
/// NULL or `offset + len` passes the loan's length. Not thread-safe per loan.
///
/// # Safety
/// `loan` is NULL or a loan not yet sent or freed; a non-NULL `data` points
/// to `len` readable bytes that do not overlap the loan's.
#[no_mangle]
pub unsafe extern "C" fn shmlink_loan_write(
    loan: *mut shmlink_loan,
    offset: usize,
    data: *const u8,
    len: usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live loan, per the contract.
        let loan = required(unsafe { loan.as_mut() }, "loan")?;
        // SAFETY: non-NULL `data` points to `len` readable bytes, per the
        // contract; they are not the loan's, so the `&mut` below is unique.
        let src = unsafe { slice(data, len, "data") }?;
        let room = loan.loan.len();
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= room)
            .ok_or_else(|| {
                Failure::new(
                    shmlink_status::SHMLINK_E_INVALID_ARGUMENT,
                    format!("{len} bytes at offset {offset} pass the loan's {room} bytes"),
                )
            })?;
        shmlink::fill_copy(&mut loan.loan[offset..end], src);
        Ok(())
    })
}

/// Releases a loan that was not sent: its room goes back to the arena (for
/// the next loan). NULL is ignored. Fine after the loan's client was closed
/// or freed. Not thread-safe per loan.
///
/// # Safety
/// `loan` is NULL or a loan not yet sent or freed.
#[no_mangle]
pub unsafe extern "C" fn shmlink_loan_free(loan: *mut shmlink_loan) {
    // SAFETY: NULL or a loan from `shmlink_client_loan` (boxed there),
    // neither sent nor freed, per the contract.
    unsafe { free_box(loan) }
}

/// Calls with the client's default timeout and hands over the response
/// where it arrived: a large response the server lent from its arena
/// (`shm:` and `unix:`, responses of at least the server's arena threshold,
/// 64 KiB by default, while its arena has room) is read in place, without a
/// copy; any other comes in a buffer of its own. `shmlink_view_is_lent`
/// tells which.
///
/// Ownership: `request` is read during the call only. On success `*out_view`
/// receives a view the caller owns and releases with `shmlink_view_free`
/// (which gives a lent response back to the server), `*out_data` points at
/// its `*out_len` bytes (NULL when the response is empty), valid until the
/// view is freed. The view keeps its memory mapped by itself: it stays
/// valid across further calls on the client and after the client is closed
/// or freed. Every view held keeps its room of the server's arena (at most
/// the server's `max_arena_bytes` per session; then responses come in
/// buffers of their own): free views when done. On failure `*out_view` and
/// `*out_data` are set to NULL and `*out_len` to 0 (NULL out-parameters:
/// `SHMLINK_E_INVALID_ARGUMENT`, nothing sent); errors as in
/// `shmlink_client_call`. Not thread-safe per client.
///
/// # Safety
/// `client` is NULL or a live client; `request` is valid for `request_len`
/// bytes (NULL allowed when 0); `out_view`, `out_data` and `out_len` are
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_response(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    out_view: *mut *mut shmlink_view,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe {
        shmlink_client_call_response_timeout(
            client,
            request,
            request_len,
            0,
            out_view,
            out_data,
            out_len,
        )
    }
}

/// `shmlink_client_call_response` with a timeout in microseconds (0: the
/// client's default), as in `shmlink_client_call_timeout`.
///
/// # Safety
/// As `shmlink_client_call_response`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_response_timeout(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    timeout_us: u64,
    out_view: *mut *mut shmlink_view,
    out_data: *mut *const u8,
    out_len: *mut usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (out_view, out_data, out_len) =
            unsafe { (out_view.as_mut(), out_data.as_mut(), out_len.as_mut()) };
        let (out_view, out_data, out_len) = (
            required(out_view, "out_view")?,
            required(out_data, "out_data")?,
            required(out_len, "out_len")?,
        );
        *out_view = std::ptr::null_mut();
        *out_data = std::ptr::null();
        *out_len = 0;
        // SAFETY: as above (no descriptors).
        let (client, request, _) =
            unsafe { request_args(client, request, request_len, std::ptr::null(), 0) }?;
        let response = client.with(|c| {
            let t = timeout(c, timeout_us);
            Ok(c.call_response_timeout(request, t)?)
        })?;
        let view = Box::new(shmlink_view { response });
        // The bytes lie in the response's buffer or mapping, not in the
        // box: the pointer stays put when the view moves.
        (*out_data, *out_len) = view.bytes();
        *out_view = Box::into_raw(view);
        Ok(())
    })
}

/// Calls as `shmlink_client_call_timeout` (the response goes into
/// `response`, its allocation reused), except that a response the server
/// lent from its arena is not copied into it: `*out_view` then receives a
/// view of it, as from `shmlink_client_call_response`, and `response` points
/// at the view's bytes (`data` and `len`; `capacity` 0: the bytes are the
/// view's, not the buffer's) until the view is freed. Otherwise `*out_view`
/// is NULL. For callers that copy every response out (language bindings): a
/// small response costs what `shmlink_client_call` costs, a lent one is
/// copied once, from the arena to where the caller wants it.
///
/// Ownership: as `shmlink_client_call_timeout`; a view received is the
/// caller's, released with `shmlink_view_free` (the buffer may be reused or
/// freed before or after; after the view is freed, read nothing through
/// it). On failure `*out_view` is NULL and `response` empty.
///
/// # Safety
/// As `shmlink_client_call`; `out_view` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_call_or_view(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    timeout_us: u64,
    response: *mut shmlink_buffer,
    out_view: *mut *mut shmlink_view,
) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or writable, per the contract.
        let out_view = required(unsafe { out_view.as_mut() }, "out_view")?;
        *out_view = std::ptr::null_mut();
        // SAFETY: the pointers are NULL or valid, per the contract (no
        // descriptors).
        let (client, request, _) =
            unsafe { request_args(client, request, request_len, std::ptr::null(), 0) }?;
        // SAFETY: as above.
        unsafe {
            exchange_into(client, timeout_us, response, |c, t, buffer| {
                let r = c.call_response_timeout(request, t)?;
                if !r.is_lent() {
                    buffer.put(r.into_vec());
                    return Ok(());
                }
                let view = Box::new(shmlink_view { response: r });
                let (data, len) = view.bytes();
                buffer.show(data, len);
                *out_view = Box::into_raw(view);
                Ok(())
            })
        }
    })
}

/// Sends a request without waiting for its response (pipelining); `*out_id`
/// (if not NULL) receives the call id that `shmlink_client_recv` reports.
///
/// # Safety
/// `client` is NULL or a live client; `request` is valid for `request_len`
/// bytes; `out_id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_send(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    out_id: *mut u64,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract (no descriptors).
    unsafe { send(client, request, request_len, std::ptr::null(), 0, out_id) }
}

/// Sends a request with file descriptors without waiting (pipelining), as
/// `shmlink_client_send`; the descriptors as in `shmlink_client_call_fds`
/// (read during this call only, the caller's afterwards too). The response
/// comes with `shmlink_client_recv`.
///
/// # Safety
/// As `shmlink_client_send`; `fds` as in `shmlink_client_call_fds`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_send_fds(
    client: *mut shmlink_client,
    request: *const u8,
    request_len: usize,
    fds: *const c_int,
    nfds: usize,
    out_id: *mut u64,
) -> shmlink_status {
    // SAFETY: forwarded under the same contract.
    unsafe { send(client, request, request_len, fds, nfds, out_id) }
}

/// Receives the next response of a pipelined call, in arrival order; waits
/// up to `timeout_us` microseconds (0: the client's default). `*out_id` gets
/// the call id, also when the call failed with `SHMLINK_E_REMOTE`.
///
/// # Safety
/// `client` is NULL or a live client; `out_id` is NULL or writable;
/// `response` as in `shmlink_client_call`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_recv(
    client: *mut shmlink_client,
    timeout_us: u64,
    out_id: *mut u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: the pointers are NULL or valid, per the contract.
    unsafe {
        receive_with(client, out_id, response, |c| {
            let t = timeout(c, timeout_us);
            Ok(c.recv_timeout(t)?)
        })
    }
}

/// Receives one reply with `take` into `response` (its id into `out_id`):
/// the body of `shmlink_client_recv` and `shmlink_client_try_receive`.
///
/// # Safety
/// As `shmlink_client_recv`.
unsafe fn receive_with(
    client: *mut shmlink_client,
    out_id: *mut u64,
    response: *mut shmlink_buffer,
    take: impl FnOnce(&mut shmlink::Client) -> Result<shmlink::Reply, Failure>,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, out_id, response) =
            unsafe { (client.as_ref(), out_id.as_mut(), response.as_mut()) };
        let client = required(client, "client")?;
        let response = required(response, "response")?;
        let reply = client.with(|c| {
            // SAFETY: the buffer is all zero or was filled by the library.
            c.recycle(unsafe { response.take() });
            take(c)
        })?;
        if let Some(out) = out_id {
            *out = reply.id;
        }
        response.put(reply.result.map_err(shmlink::Error::Remote)?);
        Ok(())
    })
}

/// The descriptor an event loop (epoll, poll, libuv, Go's poller) watches
/// for this client: it becomes readable when an answer has begun to arrive
/// after `shmlink_client_try_receive` returned `SHMLINK_E_WOULD_BLOCK`, or
/// when the session ends. Made on first use (over `shm:` the server is then
/// handed an eventfd it rings whenever it would wake this client; blocking
/// calls still work on the same client). The descriptor stays the
/// client's: watch it, never read or close it; it is closed with the
/// client. `SHMLINK_E_INVALID_ARGUMENT` (the detail names capability bit 9) over `shm:` with a server of an older
/// build.
///
/// # Safety
/// `client` is NULL or a live client; `out_fd` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_fd(
    client: *mut shmlink_client,
    out_fd: *mut std::ffi::c_int,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, out_fd) = unsafe { (client.as_ref(), out_fd.as_mut()) };
        let client = required(client, "client")?;
        let out_fd = required(out_fd, "out_fd")?;
        *out_fd = client.with(|c| {
            use std::os::fd::AsRawFd;
            Ok(c.poll_fd()?.as_raw_fd())
        })?;
        Ok(())
    })
}

/// Receives the next answer of a pipelined call if one has arrived, never
/// waiting for one to begin: `SHMLINK_E_WOULD_BLOCK` when none has (the
/// descriptor of `shmlink_client_fd`, asked for before, then becomes
/// readable when one does). An answer whose first bytes are there is
/// received whole. `*out_id` gets the call id, also with `SHMLINK_E_REMOTE`.
///
/// # Safety
/// As `shmlink_client_recv`.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_try_receive(
    client: *mut shmlink_client,
    out_id: *mut u64,
    response: *mut shmlink_buffer,
) -> shmlink_status {
    // SAFETY: the pointers are NULL or valid, per the contract.
    unsafe {
        receive_with(client, out_id, response, |c| {
            c.try_recv()?.ok_or_else(|| {
                Failure::new(
                    shmlink_status::SHMLINK_E_WOULD_BLOCK,
                    "no answer has arrived yet: wait until the descriptor of shmlink_client_fd is readable",
                )
            })
        })
    }
}

/// Waits up to `timeout_us` microseconds (0: the client's default) until
/// the next answer has begun to arrive, without receiving it: `*ready` is 1
/// when `shmlink_client_recv` or `shmlink_client_try_receive` will not wait
/// for its first bytes, 0 when the time passed first. Never cuts an answer
/// off (a timed-out `shmlink_client_recv` in the middle of a streamed
/// answer ends the session), so a caller may wait in short slices, e.g. to
/// look at a cancellation flag. `SHMLINK_E_NOTHING_IN_FLIGHT` when no call
/// is in flight.
///
/// # Safety
/// `client` is NULL or a live client; `ready` is writable.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_wait_readable(
    client: *mut shmlink_client,
    timeout_us: u64,
    ready: *mut i32,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, ready) = unsafe { (client.as_ref(), ready.as_mut()) };
        let client = required(client, "client")?;
        let ready = required(ready, "ready")?;
        *ready = i32::from(client.with(|c| {
            let t = timeout(c, timeout_us);
            Ok(c.wait_readable(t)?)
        })?);
        Ok(())
    })
}

/// Gives up on a call sent with `shmlink_client_send`: its answer is
/// dropped when it comes (or now, if it came). 1 when the call was in
/// flight, 0 when not (answered and received, abandoned already, never
/// sent, or a NULL or closed client).
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_abandon(client: *mut shmlink_client, id: u64) -> i32 {
    // SAFETY: `client` is NULL or valid, per the contract.
    let client = unsafe { client.as_ref() };
    let Some(client) = client else {
        return 0;
    };
    let mut was = false;
    let _ = guard(|| {
        was = client.with(|c| Ok(c.abandon(id)))?;
        Ok(())
    });
    i32::from(was)
}

/// Sends a one-way message: no response, no id.
///
/// # Safety
/// `client` is NULL or a live client; `message` is valid for `message_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_notify(
    client: *mut shmlink_client,
    message: *const u8,
    message_len: usize,
) -> shmlink_status {
    guard(|| {
        // SAFETY: the pointers are NULL or valid, per the contract.
        let (client, message) =
            unsafe { (client.as_ref(), slice(message, message_len, "message")) };
        let (client, message) = (required(client, "client")?, message?);
        client.with(|c| Ok(c.notify(message)?))
    })
}

/// 1 when the session is usable and the server alive (a non-blocking check),
/// else 0 (also for NULL and closed clients). While another thread is in a
/// call on the client, 1 when the session was usable when its last call
/// returned (a busy session is not a dead one; the running call reports a
/// failure itself).
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_is_connected(client: *const shmlink_client) -> i32 {
    // SAFETY: NULL or a live client, per the contract.
    let Some(client) = (unsafe { client.as_ref() }) else {
        return 0;
    };
    match client.state.try_lock() {
        Ok(g) => i32::from(g.as_ref().is_some_and(Client::is_connected)),
        Err(TryLockError::Poisoned(p)) => {
            i32::from(p.get_ref().as_ref().is_some_and(Client::is_connected))
        }
        Err(TryLockError::WouldBlock) => i32::from(client.usable.load(Ordering::Relaxed)),
    }
}

/// The transport the session really uses: `SHMLINK_TRANSPORT_SHM` (1),
/// `SHMLINK_TRANSPORT_UNIX` (2; also an `shm:` session the server could give
/// no shared memory, which continues over its socket) or
/// `SHMLINK_TRANSPORT_TCP` (3). 0 for NULL or closed clients, and while
/// another thread is in a call on the client.
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_transport(client: *const shmlink_client) -> u32 {
    // SAFETY: forwarded under the same contract.
    unsafe {
        peek(client, |c| match c.transport() {
            Transport::Shm => SHMLINK_TRANSPORT_SHM,
            Transport::Unix => SHMLINK_TRANSPORT_UNIX,
            Transport::Tcp => SHMLINK_TRANSPORT_TCP,
        })
    }
}

/// `shmlink_client_transport`: shared memory.
pub const SHMLINK_TRANSPORT_SHM: u32 = 1;
/// `shmlink_client_transport`: frames on a Unix socket.
pub const SHMLINK_TRANSPORT_UNIX: u32 = 2;
/// `shmlink_client_transport`: frames on TCP.
pub const SHMLINK_TRANSPORT_TCP: u32 = 3;

/// Calls sent with `shmlink_client_send` whose responses were not yet received
/// (0 for NULL or closed clients).
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_in_flight(client: *const shmlink_client) -> usize {
    // SAFETY: forwarded under the same contract.
    unsafe { peek(client, Client::in_flight) }
}

/// Bytes of arena the client maps for its loans (0 for NULL or closed
/// clients, before its first lent request, and while another thread is in a
/// call on the client). Many calls of the same sizes keep it flat: freed and
/// sent loans are reused.
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_arena_bytes(client: *const shmlink_client) -> u64 {
    // SAFETY: forwarded under the same contract.
    unsafe { peek(client, Client::arena_bytes) }
}

/// `read` of the open client, without waiting: zero for NULL or closed
/// clients and while another thread is in a call on it.
///
/// # Safety
/// `client` is NULL or a live client.
unsafe fn peek<R: Default>(client: *const shmlink_client, read: impl FnOnce(&Client) -> R) -> R {
    // SAFETY: NULL or a live client, per this function's contract.
    let Some(client) = (unsafe { client.as_ref() }) else {
        return R::default();
    };
    match client.state.try_lock() {
        Ok(g) => g.as_ref().map_or_else(R::default, read),
        Err(_) => R::default(),
    }
}

/// Ends the session (the server is told goodbye). The handle stays valid:
/// later calls fail with `SHMLINK_E_CLOSED`; release it with
/// `shmlink_client_free`. Closing twice is fine.
///
/// # Safety
/// `client` is NULL or a live client.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_close(client: *mut shmlink_client) -> shmlink_status {
    guard(|| {
        // SAFETY: NULL or a live client, per the contract.
        let client = required(unsafe { client.as_ref() }, "client")?;
        let mut g = match client.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        drop(g.take());
        client.usable.store(false, Ordering::Relaxed);
        Ok(())
    })
}

/// Frees the handle of a client this process inherited through `fork()`,
/// without telling the server anything: this process's descriptors are
/// closed and its mapping unmapped, and no goodbye goes on the ring, so the
/// parent's session goes on. (`shmlink_client_free` in the child would end
/// it.) NULL is fine.
///
/// # Safety
/// `client` is NULL or a live client not in use by another thread of this
/// process; it must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_forget(client: *mut shmlink_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: `client` came from `Box::into_raw` in `shmlink_client_connect`
    // (in this process or the parent it was forked from) and is freed once,
    // per the contract.
    let client = unsafe { Box::from_raw(client) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        let state = client.state.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = state {
            c.forget();
        }
    }));
}

/// Closes the session if open and frees the handle. NULL is fine.
///
/// # Safety
/// `client` is NULL or a live client not in use by another thread; it must
/// not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn shmlink_client_free(client: *mut shmlink_client) {
    if client.is_null() {
        return;
    }
    // SAFETY: `client` came from `Box::into_raw` in `shmlink_client_connect`
    // and is freed once, per the contract.
    let client = unsafe { Box::from_raw(client) };
    // Dropping the client says goodbye; never let a panic escape.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(client)));
}

/// Unmaps the segments this process keeps mapped for later sessions. A
/// client keeps the mapping of an `shm:` session it freed with a goodbye (at
/// most 8, of at most 4 MiB each, for 2 s) and uses it again when the
/// server gives the same segment to this process's next session, which
/// saves mapping and unmapping it per short session. For a process done
/// with its sessions that wants that memory back at once. Sessions in use
/// are not affected. Thread-safe.
#[no_mangle]
pub extern "C" fn shmlink_release_kept_mappings() {
    let _ = std::panic::catch_unwind(shmlink::release_kept_mappings);
}

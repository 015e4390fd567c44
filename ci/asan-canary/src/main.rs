//! Reads one byte past the end of a heap allocation. Under AddressSanitizer
//! this must abort with a heap-buffer-overflow report.

fn main() {
    let v: Vec<u8> = vec![1; 16];
    let p = v.as_ptr();
    let i = std::hint::black_box(16usize);
    // SAFETY: none — this is the deliberate bug the sanitizer must catch.
    let byte = unsafe { std::ptr::read_volatile(p.add(i)) };
    println!("read {byte} past the end: the sanitizer did not report");
}

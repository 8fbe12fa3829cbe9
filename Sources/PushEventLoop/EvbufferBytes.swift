import CLibevent

/// Bytes of an evbuffer copied into an array, left in the buffer: the one place the HTTP
/// server copies out (request bodies, the head being read, the output it may rewrite).
enum EvbufferBytes {
    /// Up to `count` bytes from the buffer's start, or from `position` when given.
    static func copy(_ buffer: OpaquePointer, count: Int, from position: evbuffer_ptr? = nil) -> [UInt8] {
        guard count > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: count)
        let copied = bytes.withUnsafeMutableBytes { target -> Int in
            guard var start = position else { return evbuffer_copyout(buffer, target.baseAddress, count) }
            return evbuffer_copyout_from(buffer, &start, target.baseAddress, count)
        }
        bytes.removeLast(count - max(0, min(copied, count)))
        return bytes
    }
}

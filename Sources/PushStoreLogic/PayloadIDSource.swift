import PushSecurity
import PushWire

/// Fresh payload IDs from a CSPRNG ([4.7-2]): 256 IDs per RAND_bytes call instead of two
/// getrandom calls per ID. Loop-confined.
struct PayloadIDSource {
    private var buffer = [UInt8](repeating: 0, count: 4096)
    private var offset = 4096

    mutating func next() -> PayloadID {
        if offset + PayloadID.byteCount > buffer.count {
            // RAND_bytes fails only without entropy; the standard generator is the fallback.
            guard let fresh = try? SecureRandom.bytes(buffer.count) else { return PayloadID.random() }
            buffer = fresh
            offset = 0
        }
        defer { offset += PayloadID.byteCount }
        return buffer.withUnsafeBytes { raw in
            PayloadID(bytes: UnsafeRawBufferPointer(rebasing: raw[offset..<offset + PayloadID.byteCount])) ?? PayloadID.random()
        }
    }
}

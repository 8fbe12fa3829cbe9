import PushSecurity
import PushWire

/// Seals payload bodies at rest with AES-256-GCM under the deployment's data keys. The
/// associated data binds a sealed body to its payload id and its recipient's internal
/// identity, so a body copied to another row (another id, another user) does not open.
/// One per thread, like the ring it holds.
package final class PayloadSealer {
    /// The key id of a body a build from before encryption stored in clear.
    static let clearKeyID: UInt32 = 0

    package let ring: DataKeyRing

    package init(ring: DataKeyRing) {
        self.ring = ring
    }

    /// The 24 bytes `id (16) || user id (8)`, big-endian, on the stack.
    static func withAssociatedData<T>(id: PayloadID, userID: UInt64, _ body: (UnsafeRawBufferPointer) throws(CipherError) -> T) throws(CipherError) -> T {
        var data = (id.high.bigEndian, id.low.bigEndian, userID.bigEndian)
        let result: Result<T, CipherError> = withUnsafeBytes(of: &data) { bytes in
            do throws(CipherError) { return .success(try body(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    static func associatedData(id: PayloadID, userID: UInt64) -> [UInt8] {
        (try? withAssociatedData(id: id, userID: userID) { Array($0) }) ?? []
    }

    /// Seals under the newest key.
    package func seal(_ body: [UInt8], id: PayloadID, userID: UInt64) throws(StoreBackendError) -> (keyID: UInt32, sealed: [UInt8]) {
        let cipher = ring.current
        do throws(CipherError) {
            let sealed = try PayloadSealer.withAssociatedData(id: id, userID: userID) { (data) throws(CipherError) in
                try body.withTypedBytes { (text) throws(CipherError) in try cipher.seal(text, associatedData: data) }
            }
            return (ring.currentID, sealed)
        } catch {
            throw StoreBackendError("cannot seal a payload: \(error)")
        }
    }

    package func open(_ sealed: [UInt8], keyID: UInt32, id: PayloadID, userID: UInt64) throws(StoreBackendError) -> [UInt8] {
        if keyID == PayloadSealer.clearKeyID { return sealed }
        return try sealed.withTypedBytes { (bytes) throws(StoreBackendError) in try open(bytes, keyID: keyID, id: id, userID: userID) }
    }

    /// Opens straight from `sealed` (a SQLite column's bytes), copying nothing first.
    package func open(_ sealed: UnsafeRawBufferPointer, keyID: UInt32, id: PayloadID, userID: UInt64) throws(StoreBackendError) -> [UInt8] {
        if keyID == PayloadSealer.clearKeyID { return Array(sealed) }
        guard let cipher = ring.cipher(for: keyID) else {
            throw StoreBackendError("payload \(id) is sealed under data key \(keyID), which the data keys file does not hold")
        }
        do throws(CipherError) {
            return try PayloadSealer.withAssociatedData(id: id, userID: userID) { (data) throws(CipherError) in
                try cipher.open(sealed, associatedData: data)
            }
        } catch {
            throw StoreBackendError("payload \(id) does not open under data key \(keyID): \(error)")
        }
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body with a typed error.
    func withTypedBytes<T, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> T) throws(E) -> T {
        let result: Result<T, E> = withUnsafeBytes { bytes in
            do throws(E) { return .success(try body(bytes)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}

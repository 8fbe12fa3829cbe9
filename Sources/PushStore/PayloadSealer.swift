import PushSecurity
import PushWire

/// Seals payload bodies at rest with AES-256-GCM under the deployment's data keys. The
/// associated data binds a sealed body to its payload id and its recipient's internal
/// identity, so a body copied to another row (another id, another user) does not open.
/// One per thread, like the ring it holds.
final class PayloadSealer {
    /// The key id of a body a build from before encryption stored in clear.
    static let clearKeyID: UInt32 = 0

    let ring: DataKeyRing

    init(ring: DataKeyRing) {
        self.ring = ring
    }

    /// The ring of the deployment that holds `databasePath`, created on first use.
    convenience init(databasePath: String) throws(SQLiteError) {
        do {
            self.init(ring: try DataKeyRing(path: StoreFiles.dataKeysPath(forDatabase: databasePath)))
        } catch {
            throw SQLiteError(code: 0, message: "data keys: \(error)")
        }
    }

    static func associatedData(id: PayloadID, userID: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        for value in [id.high, id.low, userID] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
        }
        return bytes
    }

    /// Seals under the newest key.
    func seal(_ body: [UInt8], id: PayloadID, userID: UInt64) throws(SQLiteError) -> (keyID: UInt32, sealed: [UInt8]) {
        do {
            return (ring.currentID, try ring.current.seal(body, associatedData: PayloadSealer.associatedData(id: id, userID: userID)))
        } catch {
            throw SQLiteError(code: 0, message: "cannot seal a payload: \(error)")
        }
    }

    func open(_ sealed: [UInt8], keyID: UInt32, id: PayloadID, userID: UInt64) throws(SQLiteError) -> [UInt8] {
        if keyID == PayloadSealer.clearKeyID { return sealed }
        guard let cipher = ring.cipher(for: keyID) else {
            throw SQLiteError(code: 0, message: "payload \(id) is sealed under data key \(keyID), which the data keys file does not hold")
        }
        do {
            return try cipher.open(sealed, associatedData: PayloadSealer.associatedData(id: id, userID: userID))
        } catch {
            throw SQLiteError(code: 0, message: "payload \(id) does not open under data key \(keyID): \(error)")
        }
    }
}

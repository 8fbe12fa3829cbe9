import PushStoreLogic
import PushWire

/// The enrolled registrations a running store has looked up, by device id, kept only
/// while the registry is unchanged: `refresh` asks the reader for the registry's change
/// counter (one `PRAGMA data_version` while nothing was committed) and forgets everything
/// when it moved. The store refreshes it with the users (`UserDirectory`), so a device
/// revoked or enrolled again by `securepush device revoke` or `enroll` in another process
/// is seen within `StoreSettings.usersRecheckMs`. Loop-confined.
final class EnrolledDevices {
    /// Device ids remembered at most, enrolled or not, before the cache starts over.
    static let capacity = 100_000

    private let reader: PayloadReader
    private var sequence: UInt64?
    /// By exact device id ([3.3-8]).
    private var entries: [ExactName: EnrolledDevice?] = [:]

    init(reader: PayloadReader) {
        self.reader = reader
    }

    /// The enrolled registration of `deviceID`, or nil if the registry holds none, as of
    /// the last `refresh`.
    func enrolled(_ deviceID: String) throws -> EnrolledDevice? {
        let key = ExactName(deviceID)
        if let known = entries[key] { return known }
        let found = try reader.enrolledDevice(deviceID)
        if entries.count >= EnrolledDevices.capacity { entries.removeAll(keepingCapacity: true) }
        entries[key] = .some(found)
        return found
    }

    /// Forgets what it knows if any process changed the registry since the last call.
    func refresh() throws {
        let current = try reader.registrySequence()
        guard current != sequence else { return }
        entries.removeAll(keepingCapacity: true)
        sequence = current
    }

    var cachedCount: Int { entries.count }
}

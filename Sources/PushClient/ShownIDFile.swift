#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushWire

/// The payload ids a device has shown, in its state directory next to its fetch token,
/// so that a device restarted with that directory shows none of them again: a push or a
/// SYNC may name an id again after it was shown (a queue handed on twice in a cluster, an
/// ACK that was not durable yet).
///
/// One id a line, 32 hex digits, owner-only, appended as each id is shown (before the app
/// gets it). An id the device must not acknowledge (a sealed payload it could not read,
/// SPEC.md 4.14-10) has ` -` after it, so that a restarted device does not ACK it when SYNC
/// lists it again; an older reader skips such a line, and shows that prompt once more. Bounded: past twice `capacity` lines the file is rewritten with the newest
/// `capacity`. A write survives the process being killed; a machine crash may lose the
/// last ids written. Unreadable lines are skipped.
public final class ShownIDFile {
    public static let fileName = "shown-ids"
    public let path: String
    public let capacity: Int
    private var descriptor: Int32 = -1
    private var lines = 0

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case cannotOpen(String, errno: Int32)
        case cannotWrite(String, errno: Int32)

        public var description: String {
            switch self {
            case .cannotOpen(let path, let code): "cannot open \(path): \(String(cString: strerror(code)))"
            case .cannotWrite(let path, let code): "cannot write \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// One line: an id, and whether the device may acknowledge it.
    public struct Entry: Equatable, Sendable {
        public var id: PayloadID
        public var acknowledged: Bool

        public init(id: PayloadID, acknowledged: Bool = true) {
            self.id = id
            self.acknowledged = acknowledged
        }

        var line: String { id.hex + (acknowledged ? "" : ShownIDFile.notAcknowledgedMark) + "\n" }
    }

    static let notAcknowledgedMark = " -"

    /// The ids a device showed only as the generic notification ([4.14-11]), in the same form:
    /// not shown that way again after a restart, and fetched once a token comes ([4.14-13]).
    public static let genericFileName = "generic-ids"

    /// `name`: `fileName` for the ids shown with their content, `genericFileName` for those
    /// shown as the generic notification.
    public init(directory: String, name: String = ShownIDFile.fileName, capacity: Int = DeviceClient.rememberedIDs) {
        path = directory + "/" + name
        self.capacity = max(1, capacity)
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// The ids in the file, oldest first, the newest `capacity` of them.
    public func load() -> [PayloadID] { loadEntries().map(\.id) }

    /// The lines of the file, oldest first, the newest `capacity` of them.
    public func loadEntries() -> [Entry] {
        guard let text = try? Deployment.readFile(path) else { return [] }
        var entries: [Entry] = []
        for line in text.split(separator: "\n") {
            var hex = line
            let acknowledged = !line.hasSuffix(ShownIDFile.notAcknowledgedMark)
            if !acknowledged { hex = line.dropLast(ShownIDFile.notAcknowledgedMark.count) }
            if let id = PayloadID(hex: String(hex)) { entries.append(Entry(id: id, acknowledged: acknowledged)) }
        }
        lines = entries.count
        return Array(entries.suffix(capacity))
    }

    /// Appends `id`; `newest` gives the ids to keep (oldest first, `id` among them) when
    /// the file is rewritten.
    public func append(_ id: PayloadID, newest: () -> [PayloadID]) throws(Failure) {
        try append(id, acknowledged: true) { newest().map { Entry(id: $0) } }
    }

    /// Appends `id`, marked when the device must not acknowledge it; `newest` gives the
    /// lines to keep when the file is rewritten.
    public func append(_ id: PayloadID, acknowledged: Bool, newest: () -> [Entry]) throws(Failure) {
        let fd = try openForAppend()
        let bytes = Array(Entry(id: id, acknowledged: acknowledged).line.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw .cannotWrite(path, errno: errno) }
        lines += 1
        if lines >= 2 * capacity { try rewrite(newest()) }
    }

    private func openForAppend() throws(Failure) -> Int32 {
        if descriptor >= 0 { return descriptor }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .cannotOpen(path, errno: errno) }
        descriptor = fd
        return fd
    }

    /// Replaces the file with `ids` (written whole under another name, then renamed).
    private func rewrite(_ entries: [Entry]) throws(Failure) {
        let kept = entries.suffix(capacity)
        do {
            try Deployment.writePrivate(path, kept.map(\.line).joined())
        } catch {
            throw .cannotWrite(path, errno: errno)
        }
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
        }
        lines = kept.count
    }
}

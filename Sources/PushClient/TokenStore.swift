#if canImport(Glibc)
import Glibc
#endif
import PushSecurity
import PushWire

/// A device's fetch token in its state directory, readable by its owner only, like an
/// app's local storage: one line `TOKEN_HEX EXPIRES_AT_MS`.
public struct TokenStore: Sendable {
    public static let fileName = "fetch-token"
    public let directory: String

    public struct Saved: Equatable, Sendable {
        public var token: [UInt8]
        public var expiresAt: UInt64

        public init(token: [UInt8], expiresAt: UInt64) {
            self.token = token
            self.expiresAt = expiresAt
        }
    }

    public init(directory: String) {
        self.directory = directory
    }

    public var path: String { directory + "/" + TokenStore.fileName }

    public func save(_ saved: Saved) throws {
        try Deployment.makeDirectories(directory)
        try Deployment.writePrivate(path, "\(saved.token.hexString) \(saved.expiresAt)\n")
    }

    /// The saved token, or nil when there is none (or it is unreadable).
    public func load() -> Saved? {
        guard let text = try? Deployment.readFile(path) else { return nil }
        let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard parts.count == 2, let token = [UInt8](hex: String(parts[0])), !token.isEmpty,
              let expiresAt = UInt64(parts[1]) else { return nil }
        return Saved(token: token, expiresAt: expiresAt)
    }

    /// Removes the token; true if there was one.
    @discardableResult
    public func remove() -> Bool { unlink(path) == 0 }

    /// Changes each time the file is written or removed, to notice a login by another process.
    public var version: Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return Int(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int(info.st_mtim.tv_nsec) &+ Int(info.st_ino)
    }
}

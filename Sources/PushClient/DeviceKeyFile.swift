#if canImport(Glibc)
import Glibc
#endif
import PushSealing
import PushSecurity
import PushWire

/// A device's private key for sealed payloads, in the file `device-key` of its state
/// directory next to its fetch token (SPEC.md 7.5-6): one line of the suite digit, a space
/// and the private key in hex, whose text `DeviceKeyPair` reads and writes. Owner-only and
/// replaced atomically like every file of 7.5 (7.5-5). The public key is derived from the
/// file each time, so the file alone is the device's key.
public struct DeviceKeyFile: Sendable {
    public static let fileName = "device-key"
    public let directory: String

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// The file exists but cannot be read.
        case unreadable(String, errno: Int32)
        /// Its group or others may read or write it (8-6): a private key shared is no longer the device's.
        case tooOpen(String)
        /// It does not read as 7.5-6 says.
        case invalid(String, SealingError)
        /// It could not be written (the directory, the disk).
        case cannotWrite(String, errno: Int32)
        /// A fresh key pair could not be made.
        case cannotGenerate(SealingError)
        /// The file holds a key of another suite than the one asked for.
        case otherSuite(String, has: KeySuite, asked: KeySuite)

        public var description: String {
            switch self {
            case .unreadable(let path, let code): "cannot read \(path): \(String(cString: strerror(code)))"
            case .tooOpen(let path): "\(path) may be read by others than its owner: make it owner-only (chmod 600) or make a new key with --new-key"
            case .invalid(let path, let error): "\(path) is not a device key file: \(error) (make a new key with --new-key)"
            case .cannotWrite(let path, let code): "cannot write \(path): \(String(cString: strerror(code)))"
            case .cannotGenerate(let error): "cannot make a device key: \(error)"
            case .otherSuite(let path, let has, let asked):
                "this device already has a key of suite \(has) in \(path): pass --new-key to replace it with one of suite \(asked)"
            }
        }
    }

    public init(directory: String) {
        self.directory = directory
    }

    public var path: String { directory + "/" + DeviceKeyFile.fileName }

    /// The key in the file; nil when there is no file. A file that is there but unreadable,
    /// too open or malformed is an error, never taken as "no key": making a new one would
    /// silently cost the device every payload sealed to the old one.
    public func load() throws(Failure) -> DeviceKeyPair? {
        let text: String
        do {
            text = try Deployment.readFile(path)
        } catch Deployment.Failure.missing {
            return nil
        } catch {
            throw .unreadable(path, errno: DeviceKeyFile.code(of: error))
        }
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & 0o077 != 0 { throw .tooOpen(path) }
        do {
            return try DeviceKeyPair(fileText: text)
        } catch {
            throw .invalid(path, error)
        }
    }

    /// Writes `key`, replacing any earlier file atomically (7.5-5).
    public func save(_ key: DeviceKeyPair) throws(Failure) {
        do {
            try Deployment.makeDirectories(directory)
            try Deployment.writePrivate(path, key.fileText)
        } catch {
            throw .cannotWrite(path, errno: DeviceKeyFile.code(of: error))
        }
    }

    /// The key a LOGIN registers (4.6-5): the one in the file, or a new one when there is
    /// none or `replace` says so, of `suite` (x25519 when nil; 7.6-8: the suite is chosen
    /// when the key is made). A new key is not saved here: the caller saves it once LOGIN_OK
    /// names it (4.6-8), so that a failed login keeps the old key, which what was sealed to
    /// it still needs. `suite` naming another suite than the file's key is `.otherSuite`.
    public func keyForLogin(suite: KeySuite? = nil, replace: Bool = false) throws(Failure) -> (key: DeviceKeyPair, made: Bool) {
        if !replace, let existing = try load() {
            if let suite, suite != existing.suite { throw .otherSuite(path, has: existing.suite, asked: suite) }
            return (existing, false)
        }
        do {
            return (try DeviceKeyPair.generate(suite: suite ?? .x25519), true)
        } catch {
            throw .cannotGenerate(error)
        }
    }

    /// The errno a file operation failed with.
    static func code(of error: any Error) -> Int32 {
        switch error as? Deployment.Failure {
        case .unreadable(_, let code)?, .cannotCreate(_, let code)?: code
        default: EIO
        }
    }

    /// Changes each time the file is written or removed, to notice a new key made by another process.
    public var version: Int {
        var info = stat()
        guard stat(path, &info) == 0 else { return 0 }
        return Int(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int(info.st_mtim.tv_nsec) &+ Int(info.st_ino)
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Small file-system helpers for temporary deployments and /proc.

func readTextFile(_ path: String) throws(BenchError) -> String {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw .setup("cannot read \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { break }
        bytes.append(contentsOf: chunk[..<count])
        // /proc and config files are small; anything bigger is not what we want.
        guard bytes.count < 64 * 1024 * 1024 else { break }
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// Writes a file only its owner can read.
func writePrivateFile(_ path: String, _ text: String) throws(BenchError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw .setup("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    guard written == bytes.count else { throw .setup("cannot write \(path): \(String(cString: strerror(errno)))") }
}

/// A fresh directory under $TMPDIR (or /tmp), readable by its owner only.
func makeTemporaryDirectory(prefix: String) throws(BenchError) -> String {
    let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array((base + "/" + prefix + "-XXXXXX").utf8CString)
    let made = template.withUnsafeMutableBufferPointer { buffer in buffer.baseAddress.flatMap { mkdtemp($0) } }
    guard let made else { throw .setup("cannot create a temporary directory in \(base): \(String(cString: strerror(errno)))") }
    return String(cString: made)
}

/// Removes `path` and everything under it; symbolic links are removed, never followed.
func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR {
        if let directory = opendir(path) {
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(directory)
            for name in names { removeTree(path + "/" + name) }
        }
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// This executable's path, for starting `securepush` children from `securepush bench`.
func currentExecutablePath() -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { return nil }
    return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Raises the soft limit on open files to the hard limit (children inherit it); returns
/// the limit now in force.
@discardableResult
func raiseOpenFileLimit() -> Int {
    var limit = rlimit()
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    guard getrlimit(resource, &limit) == 0 else { return 1024 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(resource, &raised) == 0 { limit = raised }
    }
    return limit.rlim_cur > rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
}

/// Writes a report file (JSON, .hgrm, SVG) whole, readable by anyone like any output.
public func writeReport(_ text: String, to path: String) throws(BenchError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw .setup("cannot write \(path): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    let bytes = Array(text.utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if written < 0, errno == EINTR { continue }
        guard written > 0 else { throw .setup("cannot write \(path): \(String(cString: strerror(errno)))") }
        offset += written
    }
}

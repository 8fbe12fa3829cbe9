#if canImport(Glibc)
import Glibc
#endif

/// Another process's memory and identity, read from /proc.
enum ProcessMemory {
    /// Resident set size in bytes (VmRSS in /proc/PID/status).
    static func residentBytes(pid: pid_t) throws(BenchError) -> Int {
        let text = try readTextFile("/proc/\(pid)/status")
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if fields.count >= 2, let kib = Int(fields[1]) { return kib * 1024 }
        }
        throw .setup("no VmRSS in /proc/\(pid)/status")
    }

    /// The process listening on TCP `port` (any local address): the socket's inode from
    /// /proc/net/tcp{,6}, then the process holding a descriptor for it. Only processes
    /// of our own user are visible, which is what a local benchmark needs.
    static func listeningProcess(port: Int) -> pid_t? {
        var inodes: Set<String> = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            guard let text = try? readTextFile(table) else { continue }
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
                guard fields.count >= 10, fields[3] == "0A",
                      let colon = fields[1].lastIndex(of: ":"),
                      Int(fields[1][fields[1].index(after: colon)...], radix: 16) == port else { continue }
                inodes.insert("socket:[\(fields[9])]")
            }
        }
        guard !inodes.isEmpty, let proc = opendir("/proc") else { return nil }
        defer { closedir(proc) }
        while let entry = readdir(proc) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let pid = pid_t(name), let fds = opendir("/proc/\(name)/fd") else { continue }
            defer { closedir(fds) }
            while let fd = readdir(fds) {
                let fdName = withUnsafeBytes(of: fd.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                var target = [CChar](repeating: 0, count: 128)
                let length = readlink("/proc/\(name)/fd/\(fdName)", &target, target.count - 1)
                guard length > 0 else { continue }
                let link = String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if inodes.contains(link) { return pid }
            }
        }
        return nil
    }
}

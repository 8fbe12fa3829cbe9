#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock instants for reports: ISO-8601 in local time with its UTC offset
/// (2025-03-01T14:05:09+01:00), which people read and every date library parses.
public enum Timestamp {
    /// Seconds since the epoch, now.
    public static func now() -> Int {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return spec.tv_sec
    }

    public static func iso8601(secondsSinceEpoch seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return "1970-01-01T00:00:00Z" }
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S", &parts)
        let local = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let offset = parts.tm_gmtoff
        guard offset != 0 else { return local + "Z" }
        let minutes = abs(offset) / 60
        return local + (offset < 0 ? "-" : "+") + twoDigits(minutes / 60) + ":" + twoDigits(minutes % 60)
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}

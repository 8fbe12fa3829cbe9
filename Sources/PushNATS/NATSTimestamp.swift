/// The time stamps nats-server writes in headers: RFC 3339 in UTC with up to nine digits
/// of fraction, as Go's `time.RFC3339Nano` formats them ("2026-11-29T10:26:28.123456789Z").
public enum NATSTimestamp {
    /// Unix milliseconds, or nil for a text not of that form (another offset than Z included).
    public static func unixMilliseconds(_ text: String) -> UInt64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.last == UInt8(ascii: "Z"), bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              bytes[10] == UInt8(ascii: "T"), bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
              let year = number(bytes[0..<4]), let month = number(bytes[5..<7]), let day = number(bytes[8..<10]),
              let hour = number(bytes[11..<13]), let minute = number(bytes[14..<16]), let second = number(bytes[17..<19]),
              year >= 1970, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var milliseconds = 0
        let fraction = bytes[19..<(bytes.count - 1)]
        if !fraction.isEmpty {
            guard fraction.first == UInt8(ascii: "."), fraction.count >= 2, fraction.count <= 10,
                  let digits = number(fraction.dropFirst())
            else { return nil }
            var scaled = digits
            var count = fraction.count - 1
            while count < 3 { scaled *= 10; count += 1 }
            while count > 3 { scaled /= 10; count -= 1 }
            milliseconds = scaled
        }
        let days = daysSinceEpoch(year: year, month: month, day: day)
        return UInt64(((days * 24 + hour) * 60 + minute) * 60 + second) * 1000 + UInt64(milliseconds)
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            value = value * 10 + Int(digit - UInt8(ascii: "0"))
        }
        return value
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
    private static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}

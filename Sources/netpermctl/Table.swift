// SPDX-License-Identifier: LGPL-2.1-or-later
/// Left-aligned text columns, sized to their widest cell.
struct Table {
    static let gap = "  "

    var header: [String]
    var rows: [[String]] = []

    var widths: [Int] {
        var widths = [Int](repeating: 0, count: header.count)
        for r in [header] + rows {
            for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) }
        }
        return widths
    }

    func render() -> String {
        let widths = widths
        return ([header] + rows).map { r in
            r.enumerated().map { i, c in
                i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count)
            }.joined(separator: Self.gap)
        }.joined(separator: "\n") + "\n"
    }
}

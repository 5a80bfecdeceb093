/// Left-aligned text columns, sized to their widest cell.
struct Table {
    var header: [String]
    var rows: [[String]] = []

    func render() -> String {
        let all = [header] + rows
        var widths = [Int](repeating: 0, count: header.count)
        for r in all { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
        return all.map { r in
            r.enumerated().map { i, c in
                i == r.count - 1 ? c : c + String(repeating: " ", count: widths[i] - c.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n") + "\n"
    }
}

/*
 * java.util.regex.Pattern as Spark's Kafka connector runs subscribePattern (Pattern.compile(p), then
 * matcher(topic).find(): Scala's findFirstIn), for tests/test_spark_javaregex.py, which checks segstore's
 * translation (segstore/spark/javaregex.py) against it where a JDK 17 is on PATH:
 *
 *   java tools/JavaPatterns.java find FILE     FILE: hex UTF-8 topic names, a "-" line, hex UTF-8 patterns
 *   java tools/JavaPatterns.java members FILE  FILE: hex UTF-8 patterns
 *   java tools/JavaPatterns.java names FILE    FILE: hex code points
 *
 * Prints one line per pattern: for find, "ok" and the indexes of the topics it finds a match in; for
 * members, "ok" and the hex ranges of the code points it matches as a whole (low-high); either way
 * "error " and PatternSyntaxException.getDescription() where Pattern.compile refuses it.  For names: one
 * line per code point, Character.getName of it (the name \N{...} reads back), or "null".
 */

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

public class JavaPatterns {
    static String text(String hex) {
        return new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        List<String> lines = Files.readAllLines(Path.of(args[1]));
        if (args[0].equals("names")) {
            StringBuilder names = new StringBuilder();
            for (String line : lines) {
                names.append(Character.getName(Integer.parseInt(line, 16))).append('\n');
            }
            System.out.print(names);
            return;
        }
        List<String> topics = new ArrayList<>();
        int first = 0;
        if (args[0].equals("find")) {
            while (!lines.get(first).equals("-")) {
                topics.add(text(lines.get(first++)));
            }
            first++;
        }
        StringBuilder out = new StringBuilder();
        for (String line : lines.subList(first, lines.size())) {
            Pattern pattern;
            try {
                pattern = Pattern.compile(text(line));
            } catch (PatternSyntaxException e) {
                out.append("error ").append(e.getDescription()).append('\n');
                continue;
            }
            out.append("ok");
            if (args[0].equals("find")) {
                for (int i = 0; i < topics.size(); i++) {
                    if (pattern.matcher(topics.get(i)).find()) {
                        out.append(' ').append(i);
                    }
                }
            } else {
                Matcher m = pattern.matcher("");
                int low = -1;
                for (int cp = 0; cp <= Character.MAX_CODE_POINT + 1; cp++) {
                    boolean in = cp <= Character.MAX_CODE_POINT && m.reset(new String(Character.toChars(cp))).matches();
                    if (in && low < 0) {
                        low = cp;
                    } else if (!in && low >= 0) {
                        out.append(' ').append(Integer.toHexString(low)).append('-').append(Integer.toHexString(cp - 1));
                        low = -1;
                    }
                }
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}

/*
 * Prints segstore/spark/javaunicode.py: the Unicode tables of Java 17's java.lang.Character that
 * java.util.regex.Pattern's \p{...} reads (CharPredicates: general categories, binary properties,
 * java* methods, scripts, blocks and the names Character.UnicodeScript.forName /
 * Character.UnicodeBlock.forName accept), as code point ranges, for segstore's translation of Spark's
 * subscribePattern (segstore/spark/javachars.py).
 *
 * Regenerate with the JDK 17 launcher (no javac step; the private name maps are read by reflection):
 *
 *   java --add-opens java.base/java.lang=ALL-UNNAMED tools/JavaUnicodeTables.java > segstore/spark/javaunicode.py
 *
 * tests/test_spark_javaregex.py checks that the committed module is what this program prints, where
 * a Java 17 is on PATH.
 */

import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.IntPredicate;

public class JavaUnicodeTables {
    static final int MAX = Character.MAX_CODE_POINT;
    /** Two-letter general category names, by Character.getType's value. */
    static final String[] CATEGORY = new String[31];

    static {
        String[][] names = {
            {"Cn", "" + Character.UNASSIGNED}, {"Lu", "" + Character.UPPERCASE_LETTER},
            {"Ll", "" + Character.LOWERCASE_LETTER}, {"Lt", "" + Character.TITLECASE_LETTER},
            {"Lm", "" + Character.MODIFIER_LETTER}, {"Lo", "" + Character.OTHER_LETTER},
            {"Mn", "" + Character.NON_SPACING_MARK}, {"Me", "" + Character.ENCLOSING_MARK},
            {"Mc", "" + Character.COMBINING_SPACING_MARK}, {"Nd", "" + Character.DECIMAL_DIGIT_NUMBER},
            {"Nl", "" + Character.LETTER_NUMBER}, {"No", "" + Character.OTHER_NUMBER},
            {"Zs", "" + Character.SPACE_SEPARATOR}, {"Zl", "" + Character.LINE_SEPARATOR},
            {"Zp", "" + Character.PARAGRAPH_SEPARATOR}, {"Cc", "" + Character.CONTROL},
            {"Cf", "" + Character.FORMAT}, {"Co", "" + Character.PRIVATE_USE},
            {"Cs", "" + Character.SURROGATE}, {"Pd", "" + Character.DASH_PUNCTUATION},
            {"Ps", "" + Character.START_PUNCTUATION}, {"Pe", "" + Character.END_PUNCTUATION},
            {"Pc", "" + Character.CONNECTOR_PUNCTUATION}, {"Po", "" + Character.OTHER_PUNCTUATION},
            {"Sm", "" + Character.MATH_SYMBOL}, {"Sc", "" + Character.CURRENCY_SYMBOL},
            {"Sk", "" + Character.MODIFIER_SYMBOL}, {"So", "" + Character.OTHER_SYMBOL},
            {"Pi", "" + Character.INITIAL_QUOTE_PUNCTUATION}, {"Pf", "" + Character.FINAL_QUOTE_PUNCTUATION},
        };
        for (String[] n : names) {
            CATEGORY[Integer.parseInt(n[1])] = n[0];
        }
    }

    /** The code points p takes, as "low-high" hex ranges (a lone code point without "-high"). */
    static List<String> ranges(IntPredicate p) {
        List<String> out = new ArrayList<>();
        int cp = 0;
        while (cp <= MAX) {
            if (!p.test(cp)) {
                cp++;
                continue;
            }
            int low = cp;
            while (cp + 1 <= MAX && p.test(cp + 1)) {
                cp++;
            }
            out.add(low == cp ? Integer.toHexString(low) : Integer.toHexString(low) + "-" + Integer.toHexString(cp));
            cp++;
        }
        return out;
    }

    /** One dict entry, its ranges as adjacent string literals wrapped under 110 columns. */
    static void entry(StringBuilder out, String key, List<String> ranges) {
        out.append("    \"").append(key).append("\": (\n");
        StringBuilder line = new StringBuilder();
        for (String r : ranges) {
            if (line.length() + r.length() + 12 > 108) {
                out.append("        \"").append(line).append(" \"\n");
                line.setLength(0);
            }
            if (line.length() > 0) {
                line.append(' ');
            }
            line.append(r);
        }
        out.append("        \"").append(line).append("\"),\n");
    }

    static Object privateStatic(Class<?> type, String name) throws ReflectiveOperationException {
        Field field = type.getDeclaredField(name);
        field.setAccessible(true);
        return field.get(null);
    }

    public static void main(String[] args) throws ReflectiveOperationException {
        if (Runtime.version().feature() != 17) {
            throw new IllegalStateException("run with Java 17, found " + Runtime.version());
        }
        // each code point's type, script and block, looked up once
        int[] types = new int[MAX + 1];
        Character.UnicodeScript[] scripts = new Character.UnicodeScript[MAX + 1];
        Character.UnicodeBlock[] blockOf = new Character.UnicodeBlock[MAX + 1];
        for (int cp = 0; cp <= MAX; cp++) {
            types[cp] = Character.getType(cp);
            scripts[cp] = Character.UnicodeScript.of(cp);
            blockOf[cp] = Character.UnicodeBlock.of(cp);
        }
        StringBuilder out = new StringBuilder();
        out.append("\"\"\"The Unicode tables of Java 17's java.lang.Character (Unicode 13.0; the update that printed")
           .append(" them:\nJAVA_VERSION) that")
           .append(" java.util.regex.Pattern's \\\\p{...} reads, for segstore/spark/javachars.py.  Code\n")
           .append("point ranges, hex, \"low-high\" or a lone code point.\n\n")
           .append("GENERATED by tools/JavaUnicodeTables.java; do not edit.  Regenerate with a JDK 17:\n")
           .append("java --add-opens java.base/java.lang=ALL-UNNAMED tools/JavaUnicodeTables.java > segstore/spark/javaunicode.py\n")
           .append("\"\"\"\n\n");
        out.append("JAVA_VERSION = \"").append(System.getProperty("java.version")).append("\"\n");
        out.append("UNICODE_VERSION = \"13.0\"\n\n");

        out.append("#: Character.getType, by two-letter general category name (Cn: every code point in none).\n");
        out.append("CATEGORIES = {\n");
        for (int type = 0; type < CATEGORY.length; type++) {
            if (CATEGORY[type] != null && type != Character.UNASSIGNED) {
                final int t = type;
                entry(out, CATEGORY[type], ranges(cp -> types[cp] == t));
            }
        }
        out.append("}\n\n");

        out.append("#: The java.lang.Character predicates Pattern reads, by method name.\n");
        out.append("METHODS = {\n");
        Map<String, IntPredicate> methods = new TreeMap<>();
        // the others Pattern reads are general categories or fixed ranges (javachars.py)
        methods.put("isAlphabetic", Character::isAlphabetic);
        methods.put("isIdeographic", Character::isIdeographic);
        methods.put("isLowerCase", Character::isLowerCase);
        methods.put("isUpperCase", Character::isUpperCase);
        methods.put("isMirrored", Character::isMirrored);
        methods.put("isJavaIdentifierStart", Character::isJavaIdentifierStart);
        methods.put("isJavaIdentifierPart", Character::isJavaIdentifierPart);
        methods.put("isUnicodeIdentifierStart", Character::isUnicodeIdentifierStart);
        methods.put("isUnicodeIdentifierPart", Character::isUnicodeIdentifierPart);
        for (Map.Entry<String, IntPredicate> m : methods.entrySet()) {
            entry(out, m.getKey(), ranges(m.getValue()));
        }
        out.append("}\n\n");

        out.append("#: Character.UnicodeScript.of, by the enum constant's name (UNKNOWN: every code point in none).\n");
        out.append("SCRIPTS = {\n");
        for (Character.UnicodeScript script : Character.UnicodeScript.values()) {
            if (script == Character.UnicodeScript.UNKNOWN) {
                continue;
            }
            entry(out, script.name(), ranges(cp -> scripts[cp] == script));
        }
        out.append("}\n\n");

        out.append("#: Character.UnicodeScript.forName's aliases (ISO 15924 codes; it upper-cases the name first).\n");
        out.append("SCRIPT_ALIASES = {\n");
        @SuppressWarnings("unchecked")
        Map<String, Character.UnicodeScript> aliases =
            new TreeMap<>((Map<String, Character.UnicodeScript>) privateStatic(Character.UnicodeScript.class, "aliases"));
        for (Map.Entry<String, Character.UnicodeScript> a : aliases.entrySet()) {
            out.append("    \"").append(a.getKey()).append("\": \"").append(a.getValue().name()).append("\",\n");
        }
        out.append("}\n\n");

        out.append("#: Character.getName of the control characters (Cc), which Unicode's own names leave out.\n");
        out.append("CONTROL_NAMES = {\n");
        for (int cp = 0; cp <= MAX; cp++) {
            if (types[cp] == Character.CONTROL) {
                out.append("    0x").append(Integer.toHexString(cp)).append(": \"").append(Character.getName(cp))
                   .append("\",\n");
            }
        }
        out.append("}\n\n");

        @SuppressWarnings("unchecked")
        Map<String, Character.UnicodeBlock> names =
            new TreeMap<>((Map<String, Character.UnicodeBlock>) privateStatic(Character.UnicodeBlock.class, "map"));
        Map<String, Character.UnicodeBlock> blocks = new TreeMap<>();
        for (Character.UnicodeBlock block : names.values()) {
            blocks.put(block.toString(), block);
        }
        out.append("#: Character.UnicodeBlock.of, by the block's field name (a block no code point is in, as\n");
        out.append("#: SURROGATES_AREA, is empty).\n");
        out.append("BLOCKS = {\n");
        for (Map.Entry<String, Character.UnicodeBlock> b : blocks.entrySet()) {
            Character.UnicodeBlock block = b.getValue();
            entry(out, b.getKey(), ranges(cp -> blockOf[cp] == block));
        }
        out.append("}\n\n");

        out.append("#: Every name Character.UnicodeBlock.forName accepts (upper case: it upper-cases the name first),\n");
        out.append("#: with its block's field name.\n");
        out.append("BLOCK_NAMES = {\n");
        for (Map.Entry<String, Character.UnicodeBlock> n : names.entrySet()) {
            out.append("    \"").append(n.getKey()).append("\": \"").append(n.getValue().toString()).append("\",\n");
        }
        out.append("}\n");
        System.out.print(out);
    }
}

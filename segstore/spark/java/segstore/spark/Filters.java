package segstore.spark;

import java.math.BigDecimal;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * Spark's pushed filters as JSON for segstore's Python planner ({@code segstore.spark.planning.pushdown}
 * decides which prune exactly): only comparisons of one column with literals travel; every
 * other filter stays with Spark.
 */
final class Filters {
    private Filters() {
    }

    /** The filter as JSON, or null where it is not a comparison the planner knows. */
    static ObjectNode toJson(Filter filter) {
        ObjectNode node = WorkerConnection.MAPPER.createObjectNode();
        if (filter instanceof EqualTo f) {
            return comparison(node, "EqualTo", f.attribute(), f.value());
        }
        if (filter instanceof GreaterThan f) {
            return comparison(node, "GreaterThan", f.attribute(), f.value());
        }
        if (filter instanceof GreaterThanOrEqual f) {
            return comparison(node, "GreaterThanOrEqual", f.attribute(), f.value());
        }
        if (filter instanceof LessThan f) {
            return comparison(node, "LessThan", f.attribute(), f.value());
        }
        if (filter instanceof LessThanOrEqual f) {
            return comparison(node, "LessThanOrEqual", f.attribute(), f.value());
        }
        if (filter instanceof In f) {
            node.put("kind", "In");
            node.put("attribute", f.attribute());
            ArrayNode values = node.putArray("values");
            for (Object value : f.values()) {
                ObjectNode literal = literal(value);
                if (literal == null) {
                    return null;
                }
                values.add(literal);
            }
            return node;
        }
        return null;
    }

    private static ObjectNode comparison(ObjectNode node, String kind, String attribute, Object value) {
        ObjectNode literal = literal(value);
        if (literal == null) {
            return null;
        }
        node.put("kind", kind);
        node.put("attribute", attribute);
        node.set("value", literal);
        return node;
    }

    /** A literal as {"type": ..., "value": ...}; timestamps as microseconds since the epoch (UTC). */
    private static ObjectNode literal(Object value) {
        ObjectNode node = WorkerConnection.MAPPER.createObjectNode();
        if (value instanceof String s) {
            node.put("type", "string").put("value", s);
        } else if (value instanceof Integer || value instanceof Long || value instanceof Short
                || value instanceof Byte) {
            node.put("type", "int").put("value", ((Number) value).longValue());
        } else if (value instanceof BigDecimal d && d.scale() <= 0) {
            node.put("type", "int").put("value", d.toBigIntegerExact().toString());
        } else if (value instanceof Timestamp t) {
            node.put("type", "timestamp").put("value", micros(t.toInstant()));
        } else if (value instanceof Instant i) {
            node.put("type", "timestamp").put("value", micros(i));
        } else if (value instanceof LocalDateTime l) {
            node.put("type", "timestamp_ntz").put("value", micros(l.toInstant(ZoneOffset.UTC)));
        } else {
            return null;
        }
        return node;
    }

    private static long micros(Instant instant) {
        return Math.addExact(Math.multiplyExact(instant.getEpochSecond(), 1_000_000L), instant.getNano() / 1000);
    }
}

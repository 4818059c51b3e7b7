package segstore.spark;

import java.util.ArrayList;
import java.util.List;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * One scan's pushdowns: the columns the query needs and the filters on topic, partition,
 * offset and time that prune its plan. Created per scan, so nothing one query pushed reaches
 * another.
 */
final class SegstoreScanBuilder implements SupportsPushDownFilters, SupportsPushDownRequiredColumns {
    private final StructType tableSchema;
    private final CaseInsensitiveStringMap options;
    private StructType required;
    private Filter[] pushed = new Filter[0];
    private final ArrayNode pushedJson = WorkerConnection.MAPPER.createArrayNode();

    SegstoreScanBuilder(StructType tableSchema, CaseInsensitiveStringMap options) {
        this.tableSchema = tableSchema;
        this.options = options;
        this.required = tableSchema;
    }

    @Override
    public void pruneColumns(StructType requiredSchema) {
        required = requiredSchema;
    }

    /**
     * Hand the planner every comparison it may use; it answers which it applies exactly (those
     * Spark need not evaluate again). A time bound prunes but stays with Spark.
     */
    @Override
    public Filter[] pushFilters(Filter[] filters) {
        List<Filter> candidates = new ArrayList<>();
        ArrayNode json = WorkerConnection.MAPPER.createArrayNode();
        for (Filter filter : filters) {
            ObjectNode node = Filters.toJson(filter);
            if (node != null) {
                candidates.add(filter);
                json.add(node);
            }
        }
        List<Filter> remaining = new ArrayList<>();
        List<Filter> applied = new ArrayList<>();
        boolean[] exact = new boolean[candidates.size()];
        if (!candidates.isEmpty()) {
            ObjectNode request = WorkerConnection.MAPPER.createObjectNode();
            request.put("op", "pushdown");
            request.set("options", Requests.options(options));
            request.set("filters", json);
            JsonNode answer = PythonWorkers.of(PythonWorkers.executable(true)).call(request);
            for (JsonNode index : answer.path("exact")) {
                exact[index.asInt()] = true;
            }
        }
        for (Filter filter : filters) {
            int at = candidates.indexOf(filter);
            if (at >= 0 && exact[at]) {
                applied.add(filter);
            } else {
                remaining.add(filter);
            }
        }
        pushedJson.removeAll();
        pushedJson.addAll(json);
        pushed = applied.toArray(new Filter[0]);
        return remaining.toArray(new Filter[0]);
    }

    @Override
    public Filter[] pushedFilters() {
        return pushed;
    }

    @Override
    public Scan build() {
        return new SegstoreScan(tableSchema, required, options, pushedJson.deepCopy());
    }
}

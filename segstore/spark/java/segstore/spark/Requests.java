package segstore.spark;

import java.util.Map;

import com.fasterxml.jackson.databind.node.ObjectNode;

/** JSON pieces of the requests to the Python workers. */
final class Requests {
    private Requests() {
    }

    /** The reader's options as given (names as the user spelled them; Python lowers them). */
    static ObjectNode options(Map<String, String> options) {
        ObjectNode node = WorkerConnection.MAPPER.createObjectNode();
        Map<String, String> given = options instanceof org.apache.spark.sql.util.CaseInsensitiveStringMap
                ? ((org.apache.spark.sql.util.CaseInsensitiveStringMap) options).asCaseSensitiveMap()
                : options;
        for (Map.Entry<String, String> entry : given.entrySet()) {
            node.put(entry.getKey(), entry.getValue());
        }
        return node;
    }
}

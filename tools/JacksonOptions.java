/*
 * Spark 4's JsonUtils as the Kafka connector reads its JSON options (connector/kafka-0-10-sql
 * JsonUtils.scala: an ObjectMapper with DefaultScalaModule and ClassTagExtensions, readValue of
 * Map[String, Seq[Int]] for assign, Map[String, Map[Int, Long]] for the offsets and timestamps), run on
 * the Jackson and Scala jars PySpark ships, for tests/test_spark_json_options.py:
 *
 *   javac -cp "PYSPARK/jars/*" -d OUT tools/JacksonOptions.java
 *   java -cp "PYSPARK/jars/*:OUT" JacksonOptions FILE
 *
 * FILE: one case a line, "p " (partitions) or "o " (offsets) then the hex of the JSON text's UTF-16 chars.  Prints one
 * line a case: "ok" then each entry as TOPIC/PARTITION (p) or TOPIC/PARTITION=VALUE (o), TOPIC the hex of its
 * UTF-16 chars, or "error" where Jackson throws (the connector's IllegalArgumentException).
 */

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.module.scala.ClassTagExtensions;
import com.fasterxml.jackson.module.scala.DefaultScalaModule$;
import com.fasterxml.jackson.module.scala.JavaTypeable;
import com.fasterxml.jackson.module.scala.JavaTypeable$;
import java.nio.file.Files;
import java.nio.file.Path;
import scala.Tuple2;
import scala.collection.Iterator;
import scala.reflect.ClassTag$;

public class JacksonOptions {
    /** JsonUtils' mapper: new ObjectMapper() with ClassTagExtensions, DefaultScalaModule registered. */
    static class Mapper extends ObjectMapper implements ClassTagExtensions {
    }

    /** The text's UTF-16 chars in hex, a lone surrogate too. */
    static String hex(String text) {
        StringBuilder out = new StringBuilder();
        for (char c : text.toCharArray()) {
            out.append(String.format("%04x", (int) c));
        }
        return out.toString();
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    public static void main(String[] args) throws Exception {
        Mapper mapper = new Mapper();
        mapper.registerModule(DefaultScalaModule$.MODULE$);
        // the JavaTypeable instances scalac finds for JsonUtils' readValue[...] calls
        JavaTypeable$ typeable = JavaTypeable$.MODULE$;
        JavaTypeable intType = typeable.gen0JavaTypeable(ClassTag$.MODULE$.Int());
        JavaTypeable longType = typeable.gen0JavaTypeable(ClassTag$.MODULE$.Long());
        JavaTypeable stringType = typeable.gen0JavaTypeable(ClassTag$.MODULE$.apply(String.class));
        JavaTypeable partitions = typeable.mapJavaTypeable(stringType,
            typeable.collectionJavaTypeable(intType, ClassTag$.MODULE$.apply(scala.collection.immutable.Seq.class)),
            ClassTag$.MODULE$.apply(scala.collection.immutable.Map.class));
        JavaTypeable offsets = typeable.mapJavaTypeable(stringType,
            typeable.mapJavaTypeable(intType, longType, ClassTag$.MODULE$.apply(scala.collection.immutable.Map.class)),
            ClassTag$.MODULE$.apply(scala.collection.immutable.Map.class));
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            boolean isPartitions = line.startsWith("p ");
            StringBuilder chars = new StringBuilder();
            for (int i = 2; i < line.length(); i += 4) {
                chars.append((char) Integer.parseInt(line.substring(i, i + 4), 16));
            }
            String text = chars.toString();
            scala.collection.Map<String, Object> map;
            try {
                map = (scala.collection.Map<String, Object>) mapper.readValue(text, isPartitions ? partitions : offsets);
            } catch (Exception e) {
                out.append("error\n");
                continue;
            }
            out.append("ok");
            Iterator<Tuple2<String, Object>> topics = map.iterator();
            while (topics.hasNext()) {
                Tuple2<String, Object> topic = topics.next();
                Iterator<Object> entries = ((scala.collection.Iterable<Object>) topic._2()).iterator();
                while (entries.hasNext()) {
                    Object entry = entries.next();
                    out.append(' ').append(hex(topic._1())).append('/');
                    if (isPartitions) {
                        out.append(entry);
                    } else {
                        Tuple2<Object, Object> pair = (Tuple2<Object, Object>) entry;
                        out.append(pair._1()).append('=').append(pair._2());
                    }
                }
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}

package example;

import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.Id;
import javax.persistence.Table;

/** The key comes from SnowflakeSequence before the INSERT: EclipseLink can batch the INSERTs. */
@Entity
@Table(name = "el_bulk_item")
public class BulkItem {
    @Id
    @GeneratedValue(generator = "el_bulk_item_seq")
    private Long id;

    private String body;

    protected BulkItem() {}

    public BulkItem(String body) { this.body = body; }

    public Long getId() { return id; }

    public String getBody() { return body; }
}
